"""The line session's current patient as a clinician meets it: `appliance session`
with a scripted model, the real MCP servers over stdio and the demo record, driven through
standard input. A unique search makes the patient current, "her chart" and "a penicillin
allergy for her" then need no ID, the approval names the patient, several matches clear the
current patient and "the second one" picks from the list, an ID the record does not hold is a
question, and /patient switches, each change announced."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.slow.test_line_session import session

pytestmark = pytest.mark.timeout(180)


def intent(tool):
    return {"intent": "TOOL_NEEDED", "task_summary": "Clinician needs the record.", "suggested_tool": tool}


GOOD = {"quality": "success_rich", "brief_summary": "The record answered."}
SCRIPT = {
    "INTENT_CLASSIFY": [intent("search_patient"), intent("get_patient_chart"), intent("add_allergy"),
                        intent("search_patient"), intent("get_patient_chart"), intent("get_patient_chart")],
    "TOOL_SELECT": [
        # "Search for patient Maria Garcia": the search for the one name read is code's call, and so
        # is "Pull up her chart": the current patient's chart (appliance.agent.settled_patient)
        {"tool_name": "add_allergy"}, {"patient_id": "pat-001", "substance": "penicillin", "reaction": "hives",
                                       "severity": None},
        {"tool_name": "get_patient_chart"}, {"patient_id": "pat-003"},  # grounded by "the second one"
        {"tool_name": "get_patient_chart"}, {"patient_id": "pat-7"},
    ],
    "RESULT_CLASSIFY": [GOOD] * 5 + [{"quality": "error_fatal", "brief_summary": "No such patient."}],
    "SYNTHESIZE": ["Maria Garcia is in the record.", "Her chart shows hypertension.",
                   "The penicillin allergy is recorded.", "He has gout."],
}
LINES = [
    "Search for patient Maria Garcia",
    "Pull up her chart",
    "Add a penicillin allergy with hives for her",
    "y",  # the approval
    "Search for patient James Wilson",
    "the second one",
    "Show the chart of pat-7",
    "/patient abc-123",
    "/patient",
    "/quit",
]


def test_the_current_patient_carries_reads_and_approved_writes(tmp_path: Path):
    done = session(tmp_path, SCRIPT, LINES)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    steps = [
        # every result here is one code reads, so the answers are code's words, never the model's
        "Found Maria Garcia (born 1971-08-22, ID pat-001).", "Current patient: pat-001 (Maria Garcia).",
        "[pat-001 (Maria Garcia)] > ", "From the chart of Maria Garcia (born 1971-08-22, ID pat-001):",
        "The assistant proposes a change to the record: Record an allergy to", "Patient: pat-001 (Maria Garcia)\n",
        "Approve this write? [y/N]", "Recorded an allergy to penicillin (hives). The record was changed.",
        "I found 3 patients matching 'James Wilson'. Which one did you mean?",
        "- James Wilson, born 1967-04-19, ID pat-003", "No current patient (was pat-001 (Maria Garcia)).",
        "[no patient] > ", "From the chart of James Wilson (born 1967-04-19, ID pat-003):",
        "Current patient: pat-003 (James Wilson).", "[pat-003 (James Wilson)] > ",
        # the conversation was about Maria Garcia: opening James Wilson starts a new one
        "A new conversation starts for pat-003 (James Wilson); the previous one is saved",
        "pat-7 is not a patient ID I know: the record holds no such patient. Which patient did you mean?",
        "[pat-003 (James Wilson)] > ",  # unchanged by an ID the record does not hold
        # /patient confirms who it is from the chart: name, birth date, sex and allergies
        "Current patient: abc-123 (John Smith) (was pat-003 (James Wilson)).", "John Smith, born 1958-03-14, male",
        "Allergies: Sulfamethoxazole", "[abc-123 (John Smith)] > ",
        "No current patient (was abc-123 (John Smith)).", "[no patient] > ",
    ]
    at = 0
    for step in steps:  # in this order
        found = out.find(step, at)
        assert found >= 0, f"missing after position {at}: {step!r}\n{out[at:at + 1500]}"
        at = found + len(step)
    assert "I need a patient ID" not in out and "[problem]" not in done.stderr
    assert not any(said in out for said in SCRIPT["SYNTHESIZE"])  # no model answer was asked for

    db = sqlite3.connect(tmp_path / "home" / "ehr.sqlite")
    written = db.execute("SELECT patient_id, reaction, source FROM allergy_intolerances WHERE substance = 'penicillin'"
                         " AND patient_id = 'pat-001'").fetchall()
    assert written == [("pat-001", "hives", "appliance")]
