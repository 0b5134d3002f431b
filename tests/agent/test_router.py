"""DETERMINISTIC_ROUTER as a table: docs/design.md §9.1 rules and §11 termination and
task patterns, and the §15 router unit rows."""

from __future__ import annotations

import pytest

from appliance.agent.nodes.router import Limits, route
from tests.agent.helpers import err, ok, state

THREE = {"total_matches": 3, "matches": [
    {"patient_id": f"pat-00{i}", "name": "James Wilson", "birth_date": f"19{50 + i}-01-01"} for i in range(3)
]}
ONE = {"total_matches": 1, "matches": [{"patient_id": "abc-123", "name": "John Smith", "birth_date": "1958-04-02"}]}
NONE = {"total_matches": 0, "matches": []}

CASES = [
    # (id, state, expected next, words expected in the reason)
    ("error-retryable -> handler", state(results=[err("check_drug_safety", "timeout", drug_name="x")], quality="error_retryable"), "ERROR_HANDLER", "error"),
    ("tool error outranks a wrong 'success' label", state(results=[err("check_drug_safety", "timeout", drug_name="x")], quality="success_rich"), "ERROR_HANDLER", "timeout"),
    ("model's error label on a good result is overruled", state("Check FDA warnings for x", [ok("check_drug_safety", drug_name="x")], quality="error_fatal"), "SYNTHESIZE", "overruled"),
    ("no_results and step>=1 -> synthesize (§9)", state("Any studies on zorblatin?", [ok("search_medical_literature", {"articles": []}, query="zorblatin")], quality="no_results"), "SYNTHESIZE", "every part"),
    ("3 patient matches -> ask_user (§15)", state("Search for patient James Wilson", [ok("search_patient", THREE, name="James Wilson")]), "SYNTHESIZE", "3 patients"),
    ("zero patient matches stops", state("Find patient Ann Body and check her chart", [ok("search_patient", NONE, name="Ann Body")]), "SYNTHESIZE", "no patient"),
    ("step_count=4 -> synthesize (§15)", state("Find patient John Smith and check his chart", [ok("search_patient", ONE, name="John Smith")], step_count=4), "SYNTHESIZE", "step limit"),
    ("duplicate call stops", state("check interactions and literature", [ok("search_medical_literature", query="a"), ok("search_medical_literature", query="a")]), "SYNTHESIZE", "repeated"),
    ("single drug safety done", state("Check FDA warnings for dofetilide", [ok("check_drug_safety", drug_name="dofetilide")]), "SYNTHESIZE", "every part"),
    ("patient + chart needs chart", state("Find patient Maria Garcia and check her chart", [ok("search_patient", ONE, name="Maria Garcia")], names=["Maria Garcia"]), "TOOL_SELECT", "get_patient_chart"),
    ("patient + chart complete", state("Find patient Maria Garcia and check her chart", [ok("search_patient", ONE, name="Maria Garcia"), ok("get_patient_chart", patient_id="abc-123")]), "SYNTHESIZE", "every part"),
    ("example 3: chart then safety", state("Find patient John Smith, check his chart, and verify metformin safety", [ok("search_patient", ONE, name="John Smith"), ok("get_patient_chart", patient_id="abc-123")]), "TOOL_SELECT", "check_drug_safety"),
    ("example 3 complete", state("Find patient John Smith, check his chart, and verify metformin safety", [ok("search_patient", ONE, name="John Smith"), ok("get_patient_chart", patient_id="abc-123"), ok("check_drug_safety", drug_name="metformin")]), "SYNTHESIZE", "every part"),
    ("interaction pattern unmet", state("Any interaction between warfarin and aspirin for this patient?", [ok("check_drug_safety", drug_name="warfarin")]), "TOOL_SELECT", "check_drug_interactions"),
    ("known patient id drops search", state("Review the chart of patient abc-123", [ok("get_patient_chart", patient_id="abc-123")], ids=["abc-123"]), "SYNTHESIZE", "every part"),
    ("named patient needs a search", state("How is patient John Smith doing?", [ok("check_drug_safety", drug_name="x")], names=["John Smith"]), "TOOL_SELECT", "search_patient"),
    ("no pattern: one good tool", state("Tell me about pat-004", [ok("get_patient_chart", patient_id="pat-004")]), "SYNTHESIZE", "single-part"),
    ("skipped tool counts as handled", state("Check FDA warnings for foo", [err("check_drug_safety", "drug_not_in_database", drug_name="foo")], quality="error_fatal", skipped_tools=("check_drug_safety",)), "ERROR_HANDLER", "error"),
    ("trial pattern", state("Are there recruiting trials for mesothelioma?", [ok("find_clinical_trials", condition="mesothelioma")]), "SYNTHESIZE", "every part"),
    ("literature pattern unmet", state("Find studies on metformin and check its safety", [ok("check_drug_safety", drug_name="metformin")]), "TOOL_SELECT", "search_medical_literature"),
    ("prescribe pattern met", state("Prescribe metformin 500mg twice daily for abc-123", [ok("prescribe_medication", {"id": 7}, patient_id="abc-123")], ids=["abc-123"]), "SYNTHESIZE", "every part"),
]


@pytest.mark.parametrize("case_id,st,expected,reason_words", CASES, ids=[c[0] for c in CASES])
def test_route_table(case_id, st, expected, reason_words):
    decision = route(st, Limits())
    assert decision.next == expected, decision.reason
    assert reason_words in decision.reason


def test_multiple_matches_clarification_lists_every_candidate():
    decision = route(state("Search for patient James Wilson", [ok("search_patient", THREE, name="James Wilson")]))
    assert decision.clarification.startswith("I found 3 patients matching 'James Wilson'")
    for i in range(3):
        assert f"pat-00{i}" in decision.clarification


def test_none_accepted_only_when_patterns_are_met():
    base = state("Find patient John Smith and check his chart", [ok("search_patient", ONE, name="John Smith")])
    refused = route(base.merge({"current_tool": "none"}))
    assert refused.next == "TOOL_SELECT" and refused.strict_selection
    done = state("Check FDA warnings for dofetilide", [ok("check_drug_safety", drug_name="dofetilide")])
    assert route(done.merge({"current_tool": "none"})).next == "SYNTHESIZE"


def test_custom_step_limit():
    st = state("Find patient John Smith and check his chart", [ok("search_patient", ONE, name="John Smith")])
    assert route(st, Limits(max_steps=1)).next == "SYNTHESIZE"
    assert route(st, Limits(max_steps=2)).next == "TOOL_SELECT"
