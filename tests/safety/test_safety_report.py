"""The safety report (order, text, audit), the headless policy, and the knowledge lookups."""

from __future__ import annotations

import json

import pytest

from appliance.safety import (
    AmbiguousDrug,
    KnowledgeUnavailable,
    Override,
    ToolBoxKnowledge,
    check_prescription,
    decide,
)
from appliance.safety.headless import OVERRIDE_HINT, HeadlessApprover
from appliance.safety.report import (
    UNKNOWN_DRUG_TEXT,
    Finding,
    SafetyReport,
    fit_audit,
    sort_findings,
)
from appliance.tools.base import ToolOutcome
from mcp_servers.knowledge import server as knowledge_server
from tests.safety.safety_helpers import (
    FakeKnowledge,
    InMemoryToolBox,
    make_chart,
    safety_of,
)

PENICILLIN_ANAPHYLAXIS = [("Penicillin", "Anaphylaxis", "severe")]


def _report(findings, **kw) -> SafetyReport:
    checked = dict.fromkeys(("drug_data", "allergies", "interactions", "duplicates", "pregnancy", "renal", "age"), True)
    return SafetyReport(kw.get("drug", "x"), (), (), sort_findings(findings), checked)


# -- report ----------------------------------------------------------------------------------
def test_findings_are_sorted_most_severe_first(knowledge):
    chart = make_chart(80, meds=["Warfarin", "Lisinopril"], labs=[("33914-3", "eGFR", 25)],
                       allergies=[("Naproxen", "Dyspepsia", "mild")])
    report = check_prescription("ibuprofen", chart, knowledge)
    order = ["high", "moderate", "low", "info"]
    severities = [f.severity for f in report.findings]
    assert severities == sorted(severities, key=order.index)
    assert report.blocking and report.lines()[0].startswith("HIGH ")


def test_formatted_text_lists_every_finding_and_says_when_there_are_none(knowledge):
    report = check_prescription("amoxicillin", make_chart(40, allergies=PENICILLIN_ANAPHYLAXIS), knowledge)
    text = report.formatted()
    assert "1 high" in text and "HIGH allergy: Penicillin allergy recorded" in text
    clear = check_prescription("amlodipine", make_chart(40, meds=["Metformin"]), knowledge)
    assert clear.findings == () and clear.lines() == []
    assert "no findings" in clear.formatted() and "interactions" in clear.formatted()


def test_audit_entry_is_json_and_keeps_the_evidence(knowledge):
    report = check_prescription("amoxicillin", make_chart(40, allergies=PENICILLIN_ANAPHYLAXIS), knowledge)
    audit = json.loads(json.dumps(report.to_audit("specialist advice")))
    assert audit["blocking"] is True and audit["override_reason"] == "specialist advice"
    assert audit["resolved"] == ["amoxicillin"]
    assert audit["findings"][0]["evidence"]["allergy"]["substance"] == "Penicillin"


def test_finding_rejects_unknown_kinds():
    with pytest.raises(ValueError):
        Finding("vibes", "high", "x")


# -- headless policy -------------------------------------------------------------------------
def headless(report, reason):
    """The one policy as a headless run applies it (signed in with the password for the run)."""
    return decide(report, True, Override(reason, True), how_to_override=OVERRIDE_HINT)


def test_headless_refuses_a_blocking_report_without_a_reason(knowledge):
    report = check_prescription("amoxicillin", make_chart(40, allergies=PENICILLIN_ANAPHYLAXIS), knowledge)
    decision = headless(report, None)
    assert not decision.allowed
    assert "refused" in decision.message and "Penicillin allergy" in decision.message
    assert "--override-safety" in decision.message and ".." not in decision.message
    assert headless(report, "   ").allowed is False  # a blank reason is no reason
    assert headless(report, "   x  ").allowed is False  # nor one letter (the case)


def test_headless_override_with_a_reason_runs_and_is_audited(knowledge):
    report = check_prescription("amoxicillin", make_chart(40, allergies=PENICILLIN_ANAPHYLAXIS), knowledge)
    decision = headless(report, "  tolerated amoxicillin in 2025,\n allergy delabelled ")
    assert decision.allowed
    assert decision.audit["override_reason"] == "tolerated amoxicillin in 2025, allergy delabelled"
    assert decision.audit["blocking"] is True


def test_headless_runs_without_high_findings_and_still_audits_them(knowledge):
    report = check_prescription("apixaban", make_chart(40, labs=[("62238-1", "eGFR", 42)]), knowledge)
    assert not report.needs_override and report.findings[0].severity == "moderate"
    decision = headless(report, None)
    assert decision.allowed and decision.audit["findings"][0]["kind"] == "renal"


def test_headless_refuses_what_was_not_checked_unless_overridden(knowledge):
    """Nothing unchecked is written quietly: a drug unknown to the local data needs an override."""
    report = check_prescription("zorbitravine", make_chart(40), knowledge)
    assert not report.blocking and report.unchecked and UNKNOWN_DRUG_TEXT in report.unchecked[0]
    decision = headless(report, None)
    assert not decision.allowed and "not checked" in decision.message and "zorbitravine" in decision.message
    assert "--override-safety REASON" in decision.message and decision.audit["unchecked"] == report.unchecked
    allowed = headless(report, "compounded by pharmacy, checked by hand")
    assert allowed.allowed and allowed.audit["override_reason"] == "compounded by pharmacy, checked by hand"
    approval = HeadlessApprover("checked by hand, pharmacist agreed")("prescribe_medication", {}, report)
    assert approval.approved and approval.override_reason == "checked by hand, pharmacist agreed"
    assert not HeadlessApprover("checked")("prescribe_medication", {}, report).approved  # one word is no reason
    assert not HeadlessApprover()("prescribe_medication", {}, report).approved


def test_the_headless_approval_carries_an_override_reason_only_for_a_blocking_report(knowledge):
    blocking = check_prescription("amoxicillin", make_chart(40, allergies=PENICILLIN_ANAPHYLAXIS), knowledge)
    clear = check_prescription("amlodipine", make_chart(40, meds=["Metformin"]), knowledge)
    approver = HeadlessApprover("  specialist   advice   given ")
    overridden = approver("prescribe_medication", {}, blocking)
    assert overridden.approved and overridden.override_reason == "specialist advice given"
    assert approver("prescribe_medication", {}, clear).override_reason is None  # nothing overridden
    refused = HeadlessApprover()("prescribe_medication", {}, blocking)
    assert not refused.approved and refused.override_reason is None


def test_an_audit_entry_fits_the_records_bound_keeping_the_most_severe_findings():
    evidence = {"medication": {"notes": "n" * 900}}
    findings = [Finding("interaction", "high", "major interaction with warfarin", evidence, "data")] + [
        Finding("interaction", "low", f"minor interaction with drug {n}", evidence, "data") for n in range(40)]
    entry = _report(findings).to_audit("reason kept")
    assert fit_audit(entry, 10**6) is entry  # one that fits is kept whole
    no_evidence = fit_audit(entry, 8000)
    assert len(json.dumps(no_evidence, sort_keys=True)) <= 8000 and no_evidence["evidence_omitted"] is True
    assert len(no_evidence["findings"]) == 41 and "findings_omitted" not in no_evidence
    assert all("evidence" not in f for f in no_evidence["findings"])
    tight = fit_audit(entry, 1500)
    assert len(json.dumps(tight, sort_keys=True)) <= 1500
    assert tight["findings"][0]["text"] == "major interaction with warfarin"
    assert tight["findings_omitted"] == 41 - len(tight["findings"]) > 0
    assert tight["override_reason"] == "reason kept" and tight["blocking"] is True


# -- never a clear report for what was not checked ---------------------------------------------
@pytest.mark.parametrize("drug", ["zorbitravine", "Made-Up Drug 10 mg", "cefadroxil", "rivastigmine"])
def test_an_unknown_drug_is_never_clear(drug, knowledge):
    for chart in (make_chart(40), make_chart(40, meds=["Warfarin"]), {}):
        report = check_prescription(drug, chart, knowledge)
        unknown = [f for f in report.findings if f.kind == "unknown_drug"]
        assert unknown and UNKNOWN_DRUG_TEXT in unknown[0].text
        assert "no findings" not in report.formatted() and not report.complete


def test_a_combination_is_checked_through_its_known_ingredient(knowledge):
    report = check_prescription("amoxicillin-clavulanate", make_chart(60, meds=["Methotrexate"]), knowledge)
    assert ("interaction", "high") in {(f.kind, f.severity) for f in report.findings}
    # Known as a whole or not, the amoxicillin entry's interaction rows are read; clavulanate, given only
    # with amoxicillin and with no label of its own, is never a reason to refuse.
    assert "amoxicillin" in report.resolved and not report.unchecked


def test_an_ambiguous_name_is_a_finding():
    fake = FakeKnowledge(safety={"tylenol pm": AmbiguousDrug("Tylenol PM", ["acetaminophen", "diphenhydramine"])})
    report = check_prescription("Tylenol PM", make_chart(40), fake)
    assert report.findings[0].kind == "unknown_drug" and "acetaminophen, diphenhydramine" in report.findings[0].text


def test_an_unavailable_service_is_a_finding_not_a_clear_report():
    fake = FakeKnowledge(safety={"warfarin": KnowledgeUnavailable("timeout")})
    report = check_prescription("warfarin", make_chart(40, meds=["Aspirin"], problems=[("Pregnancy", "77386006")]),
                                fake)
    kinds = {(f.kind, f.severity) for f in report.findings}
    assert ("not_checked", "moderate") in kinds
    assert ("pregnancy", "high") in kinds  # the curated table still speaks
    assert ("interaction", "high") in kinds  # so does the class rule (anticoagulant with NSAID)
    assert not report.checked["drug_data"] and "no findings" not in report.formatted()


def test_interaction_service_failure_is_reported():
    class Failing(FakeKnowledge):
        def interactions(self, names):
            raise KnowledgeUnavailable("timeout")

    fake = Failing(safety={"metformin": safety_of("metformin")})
    report = check_prescription("metformin", make_chart(40, meds=["Lisinopril"]), fake)
    assert any(f.kind == "not_checked" and f.severity == "moderate" for f in report.findings)
    assert not report.checked["interactions"]


def test_a_missing_or_malformed_chart_is_never_clear(knowledge):
    for chart in ({}, {"patient": None, "medications": "x", "allergies": [None, 3]}, None):
        report = check_prescription("warfarin", chart, knowledge)
        gaps = [f for f in report.findings if f.kind == "not_checked" and f.source == "chart"]
        assert gaps and gaps[0].severity == "moderate" and "not checked" in gaps[0].text
        assert "no findings" not in report.formatted() and not report.complete


# -- knowledge over the tools ----------------------------------------------------------------
    def drug_names(self) -> list[str]:
        return []


@pytest.fixture
def server_knowledge(data_home):
    knowledge_server.configure(data_home / "knowledge.sqlite")
    yield ToolBoxKnowledge(InMemoryToolBox(knowledge_server), deadline=10.0)
    knowledge_server.configure(None)


@pytest.mark.parametrize("patient, drug", [
    ("abc-123", "metformin"), ("pat-005", "ibuprofen"), ("pat-010", "amoxicillin-clavulanate"),
    ("pat-016", "tramadol"), ("pat-008", "zorbitravine"),
])
def test_tool_lookup_gives_the_same_report_as_the_store(patient, drug, chart_of, knowledge, server_knowledge):
    chart = chart_of(patient)
    assert check_prescription(drug, chart, server_knowledge) == check_prescription(drug, chart, knowledge)


class ScriptedBox:
    def __init__(self, outcome: ToolOutcome):
        self.outcome = outcome

    def call(self, tool, args, deadline):
        return self.outcome


def test_tool_lookup_maps_the_error_types():
    not_found = ToolBoxKnowledge(ScriptedBox(ToolOutcome(error_type="drug_not_in_database", message="x")), 5)
    assert not_found.drug_safety("zorbitravine") is None
    assert not_found.interactions(["a", "b"])["not_recognised"] == ["a", "b"]
    ambiguous = ToolBoxKnowledge(ScriptedBox(ToolOutcome(
        error_type="ambiguous_drug_name", message="'X' matches several drugs: a, b; name the generic")), 5)
    with pytest.raises(AmbiguousDrug) as exc:
        ambiguous.drug_safety("X")
    assert exc.value.candidates == ["a", "b"]
    down = ToolBoxKnowledge(ScriptedBox(ToolOutcome(error_type="timeout", message="slow")), 5)
    with pytest.raises(KnowledgeUnavailable):
        down.drug_safety("warfarin")
    with pytest.raises(KnowledgeUnavailable):
        down.interactions(["warfarin", "aspirin"])


def test_the_agent_gate_reads_the_chart_once_and_hands_it_on(data_home, chart_of, knowledge, server_knowledge):
    """ChartSafetyGate reads the chart through the agent's tools and keeps it on the report, so
    the approval dialog shows the chart the checks ran on; the chart never changes the findings."""
    from appliance.safety.chart_gate import ChartSafetyGate

    class ChartThenKnowledge(InMemoryToolBox):
        def __init__(self):
            super().__init__(knowledge_server)
            self.tools: list[str] = []

        def call(self, tool, args, deadline):
            self.tools.append(tool)
            return ToolOutcome(result=chart_of(args["patient_id"])) if tool == "get_patient_chart" else super().call(tool, args, deadline)

    box = ChartThenKnowledge()
    report = ChartSafetyGate(box, 10.0)({"patient_id": "pat-005", "medication_name": "ibuprofen"})
    assert box.tools.count("get_patient_chart") == 1
    assert report.chart is chart_of("pat-005") and report == check_prescription("ibuprofen", chart_of("pat-005"), knowledge)
    assert "chart" not in repr(report)
