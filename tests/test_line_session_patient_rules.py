"""The line session's current patient as a table: which patient a turn
settles on, how a change is announced, and what the approval prompt shows. The session itself,
with the real MCP servers, is tests/slow/test_line_session_patient.py."""

from __future__ import annotations

import pytest

from appliance.agent.state import AgentState, ExtractedEntities, ToolResult
from appliance.conversation.current import KEEP as _KEEP
from appliance.conversation.current import CurrentPatient, turn_patient
from appliance.line_session.loop import ask_approval
from mcp_servers.contracts import TOOL_LABELS

ONE = {"total_matches": 1, "matches": [{"patient_id": "pat-001", "name": "Maria Garcia"}]}
TWO = {"total_matches": 2, "matches": [{"patient_id": "pat-002", "name": "James Wilson"},
                                       {"patient_id": "pat-003", "name": "James Wilson"}]}
CHART = {"patient": {"patient_id": "abc-123", "name": "John Smith"}}


def ok(tool, result, **args):
    return ToolResult(tool, TOOL_LABELS[tool], args, result, "ok")


def failed(tool, error_type, **args):
    return ToolResult(tool, TOOL_LABELS[tool], args, None, "failed", error="failed", error_type=error_type)


def turn(*results, said=()):
    return AgentState(user_query="q", extracted_entities=ExtractedEntities(patient_ids=tuple(said)),
                      tool_results=tuple(results))


CASES = [
    # (case, the turn, the patient it settles on: an ID, None to clear, or _KEEP)
    ("a unique search match", turn(ok("search_patient", ONE, name="Maria Garcia")), "pat-001"),
    ("several matches: asked, so cleared", turn(ok("search_patient", TWO, name="James Wilson")), None),
    ("no match: nothing learnt", turn(failed("search_patient", "not_found", name="Ann Body")), _KEEP),
    ("a chart read", turn(ok("get_patient_chart", CHART, patient_id="abc-123")), "abc-123"),
    ("the last record call wins", turn(ok("search_patient", ONE, name="Maria Garcia"),
                                       ok("get_patient_chart", CHART, patient_id="abc-123")), "abc-123"),
    ("a write", turn(ok("add_allergy", {"id": "x"}, patient_id="pat-003")), "pat-003"),
    ("a rejected write: the typed ID still counts", turn(failed("add_allergy", "rejected_by_user", patient_id="pat-003"),
                                                        said=["pat-003"]), "pat-003"),
    ("an ID in the words, no call", turn(said=["pat-78234"]), "pat-78234"),
    ("an ID the record does not hold", turn(failed("get_patient_chart", "patient_not_found", patient_id="pat-7"),
                                            said=["pat-7"]), _KEEP),
    ("two IDs in the words", turn(said=["pat-001", "pat-002"]), _KEEP),
    ("no patient at all", turn(ok("check_drug_safety", {"x": 1}, drug_name="warfarin")), _KEEP),
]


@pytest.mark.parametrize("case,state,expected", CASES, ids=[c[0] for c in CASES])
def test_the_patient_a_turn_settles_on(case, state, expected):
    assert turn_patient(state) == expected


def test_a_change_is_announced_with_names_learnt_from_results():
    current = CurrentPatient()
    assert current.label() == "no patient"
    assert current.after_turn(turn(ok("search_patient", ONE, name="Maria Garcia"))) == "Current patient: pat-001 (Maria Garcia)."
    assert current.after_turn(turn(ok("get_patient_chart", {"patient": {"patient_id": "pat-001"}}, patient_id="pat-001"))) is None
    assert current.after_turn(turn(ok("get_patient_chart", CHART, patient_id="abc-123"))) == \
        "Current patient: abc-123 (John Smith) (was pat-001 (Maria Garcia))."
    assert current.after_turn(turn(ok("search_patient", TWO, name="James Wilson"))) == \
        "No current patient (was abc-123 (John Smith))."
    assert current.switch("pat-009") == "Current patient: pat-009."


@pytest.mark.parametrize("current_id,shown", [
    ("pat-001", "Patient: pat-001 (Maria Garcia)\n"),
    ("abc-123", "Patient: pat-001 (Maria Garcia)  (NOT the current patient)\n"),
    (None, "Patient: pat-001 (Maria Garcia)\n"),
])
def test_the_approval_names_the_patient(monkeypatch, capsys, current_id, shown):
    current = CurrentPatient(current_id, {"pat-001": "Maria Garcia"})
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    approval = ask_approval("add_allergy", {"patient_id": "pat-001", "substance": "penicillin"}, current)
    assert not approval.approved
    assert shown in capsys.readouterr().out
