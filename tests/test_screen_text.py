"""The last check before a screen: no patient ID the turn did not read, the clinician did not
write and the conversation is not about, in the line session or anywhere screen_safe is used."""

from __future__ import annotations

import pytest

from appliance.agent.state import AgentState, ToolResult
from appliance.screen_text import HIDDEN, allowed_patient_ids, screen_safe
from mcp_servers.contracts import TOOL_LABELS
from tests.line_session_driver import run_session

pytestmark = pytest.mark.timeout(60)
WILSONS = {"total_matches": 2, "matches": [{"patient_id": "pat-010", "name": "James Wilson"},
                                           {"patient_id": "pat-011", "name": "James Wilson"}]}


def state(query: str, *results: ToolResult, patient: str | None = None) -> AgentState:
    return AgentState(user_query=query, selected_patient_id=patient, tool_results=tuple(results))


def search(result: dict) -> ToolResult:
    return ToolResult("search_patient", TOOL_LABELS["search_patient"], {"name": "James Wilson"}, result, "ok")


CASES = [
    ("an invented ID is hidden", state("What is hypertension?", patient="abc-123"),
     "Raised pressure (pat-003 memer).", f"Raised pressure ({HIDDEN} memer)."),
    ("the open patient is shown", state("What does he take?", patient="abc-123"),
     "abc-123 takes lisinopril.", "abc-123 takes lisinopril."),
    ("a search's matches are shown", state("find James Wilson", search(WILSONS)),
     "pat-010 and pat-011 match.", "pat-010 and pat-011 match."),
    ("an ID the clinician typed is shown", state("Is pat-077 on warfarin?"), "pat-077: no.", "pat-077: no."),
    ("a UUID in another case is hidden", state("q"), "See 0B6A1C2E-1111-2222-3333-444455556666.", f"See {HIDDEN}."),
    ("words with dashes are not IDs", state("q"), "Follow-up in 2 weeks; COVID-19 test.", "Follow-up in 2 weeks; COVID-19 test."),
]


@pytest.mark.parametrize("case,turn,text,expected", CASES, ids=[c[0] for c in CASES])
def test_screen_safe(case, turn, text, expected):
    assert screen_safe(text, allowed_patient_ids(turn)) == expected


def test_the_conversations_own_patients_stay_visible():
    assert screen_safe("Earlier: pat-002.", allowed_patient_ids(state("and now?"), {"pat-002"})) == "Earlier: pat-002."


def test_the_line_session_never_prints_another_patients_id(monkeypatch, tmp_path):
    script = {"INTENT_CLASSIFY": [{"intent": "DIRECT", "task_summary": "Q.", "suggested_tool": None}],
              "SYNTHESIZE": ["Hypertension is raised blood pressure (pat-003 memer) over time."]}
    tools = {"get_patient_chart": [{"result": {"patient": {"patient_id": "abc-123", "name": "John Smith"}}}]}
    out, _, _ = run_session(monkeypatch, tmp_path, ["/patient abc-123", "What is hypertension?", "/quit"],
                            script, tools)
    assert "pat-003" not in out and "abc-123" in out


def test_a_result_made_by_code_alone_allows_the_conversations_patients_only():
    allowed = allowed_patient_ids(None, {"pat-006"})
    assert screen_safe("pat-006: NCT01234567 may fit; pat-009 not.", allowed) == f"pat-006: NCT01234567 may fit; {HIDDEN} not."
