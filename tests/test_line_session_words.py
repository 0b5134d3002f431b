"""The line session, in process with a scripted model and tools: Ctrl+C after an approved write
says what was written; patients chosen in words from the last list shown; a typo offers the
closest names; the progress line moves on its own and never writes over a prompt."""

from __future__ import annotations

import io
import time

import pytest

from appliance.line_session.progress import Progress
from ehr_db.name_match import closest_sentence
from tests.line_session_driver import run_session

pytestmark = pytest.mark.timeout(60)
IC, TS, RC, SY = "INTENT_CLASSIFY", "TOOL_SELECT", "RESULT_CLASSIFY", "SYNTHESIZE"
WILSONS = {"total_matches": 3, "matches": [
    {"patient_id": f"pat-01{i}", "name": "James Wilson", "birth_date": f"19{50 + 10 * i}-06-01", "sex": "male"}
    for i in range(3)]}


def chart(pid: str, name: str) -> dict:
    return {"patient": {"patient_id": pid, "name": name, "birth_date": "1960-06-01", "sex": "male"},
            "allergies": [], "medications": []}


ALLERGY = {"patient_id": "abc-123", "substance": "penicillin", "reaction": "hives", "severity": "moderate"}


def test_ctrl_c_after_an_approved_write_says_it_was_written(monkeypatch, tmp_path):
    script = {IC: [{"intent": "TOOL_NEEDED", "task_summary": "Document an allergy.", "suggested_tool": "add_allergy"}],
              TS: [{"tool_name": "add_allergy"}, dict(ALLERGY)],
              RC: [{"quality": "success_rich", "brief_summary": "Written."}], SY: ["Done."]}
    tools = {"get_patient_chart": [{"result": chart("abc-123", "John Smith")}] * 3,
             "add_allergy": [{"result": {"id": "al-1"}}]}
    out, box, _ = run_session(monkeypatch, tmp_path, [
        "/patient abc-123", "Document a penicillin allergy with hives for abc-123", "y", "/quit"],
        script, tools, interrupt_after="add_allergy")
    assert [args for tool, args in box.calls if tool == "add_allergy"] == [ALLERGY]
    stopped = next(line for line in out.splitlines() if line.startswith("[answer stopped"))
    assert "saved to the record before the stop: Allergy Documentation for abc-123" in stopped
    assert "nothing else was written" in stopped and "nothing more was done" not in out


def test_ctrl_c_with_no_write_says_nothing_was_written(monkeypatch, tmp_path):
    script = {IC: [{"intent": "TOOL_NEEDED", "task_summary": "Chart.", "suggested_tool": "get_patient_chart"}],
              TS: [{"tool_name": "get_patient_chart"}, {"patient_id": "abc-123"}],
              RC: [{"quality": "success_rich", "brief_summary": "Chart."}], SY: ["He takes nothing."]}
    tools = {"get_patient_chart": [{"result": chart("abc-123", "John Smith")}] * 3}
    out, _, _ = run_session(monkeypatch, tmp_path, ["What does abc-123 take?", "/quit"],
                            script, tools, interrupt_after="get_patient_chart")
    assert "[answer stopped: nothing was written to the record; the session goes on]" in out
    assert "He takes nothing." not in out


def test_pull_up_a_name_shared_by_three_then_pick_in_words(monkeypatch, tmp_path):
    tools = {"search_patient": [{"result": WILSONS}] * 2,
             "get_patient_chart": [{"result": chart("pat-011", "James Wilson")},
                                   {"result": chart("pat-012", "James Wilson")}]}
    out, box, model = run_session(monkeypatch, tmp_path, [
        "pull up james wilson", "the one born 1960", "pull up James Wilson born 1970", "/quit"], tools=tools)
    assert "3 patients match 'james wilson':" in out
    assert "  2. James Wilson, born 1960-06-01, ID pat-011" in out
    assert "Current patient: pat-011 (James Wilson)." in out
    assert "Current patient: pat-012 (James Wilson) (was pat-011 (James Wilson))." in out
    assert model.history == []  # code chose: no model call


def test_the_second_one_after_find_and_a_question_with_the_pick(monkeypatch, tmp_path):
    script = {IC: [{"intent": "DIRECT", "task_summary": "Question.", "suggested_tool": None}], SY: ["An answer."]}
    tools = {"search_patient": [{"result": WILSONS}],
             "get_patient_chart": [{"result": chart("pat-011", "James Wilson")}]}
    out, _, model = run_session(monkeypatch, tmp_path, [
        "/find James Wilson", "what should I watch for in the second one?", "/quit"], script, tools)
    assert "Current patient: pat-011 (James Wilson)." in out
    assert "An answer." in out  # the rest of the line went to the agent, about that patient
    assert [c.node for c in model.history][:1] == [IC]


def test_a_typo_offers_the_closest_names_and_one_is_picked(monkeypatch, tmp_path):
    offer = closest_sentence([{"patient_id": "pat-006", "name": "Emily Johnson", "birth_date": "1984-06-02"}])
    tools = {"search_patient": [{"error_type": "not_found",
                                 "message": f"No patient named 'emily jonson' was found. {offer}"}],
             "get_patient_chart": [{"result": chart("pat-006", "Emily Johnson")}]}
    out, _, _ = run_session(monkeypatch, tmp_path, ["/find emily jonson", "the first one", "/quit"], tools=tools)
    assert "No exact match for 'emily jonson'; did you mean:" in out
    assert "  1. Emily Johnson, born 1984-06-02, ID pat-006" in out
    assert "did not work" not in out
    assert "Current patient: pat-006 (Emily Johnson)." in out


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_progress_line_moves_without_events_and_pauses_for_prompts():
    stream = Tty()
    progress = Progress(stream, tick=0.02).start("Writing the answer")
    progress.started -= 10
    time.sleep(0.1)
    assert "Writing the answer... 10 s" in stream.getvalue()
    progress.started -= 1
    time.sleep(0.1)
    assert "Writing the answer... 11 s" in stream.getvalue()  # moved with no event at all
    with progress.paused():
        before = stream.getvalue()
        time.sleep(0.1)
        assert stream.getvalue() == before  # nothing written over the approval prompt
    progress.done()
    after = stream.getvalue()
    time.sleep(0.1)
    assert stream.getvalue() == after and after.endswith("\r\033[K")


def test_no_progress_when_standard_error_is_not_a_terminal():
    stream = io.StringIO()
    progress = Progress(stream, tick=0.01).start("Reading the request")
    time.sleep(0.05)
    progress.done()
    assert stream.getvalue() == ""


def test_a_reply_to_the_agents_own_question_goes_on_to_the_agent(monkeypatch, tmp_path):
    script = {IC: [{"intent": "TOOL_NEEDED", "task_summary": "Find.", "suggested_tool": "search_patient"}],
              TS: [{"tool_name": "search_patient"}, {"name": "James Wilson"}],
              RC: [{"quality": "success_partial", "brief_summary": "Three."}]}
    tools = {"search_patient": [{"result": WILSONS}]}
    out, box, model = run_session(monkeypatch, tmp_path, [
        "Search for patient James Wilson", "James Wilson born 1960", "/quit"], script, tools)
    assert "I found 3 patients matching 'James Wilson'. Which one did you mean?" in out
    # the reply went to the agent (its own choice from history), not to a search by the front end
    assert [t for t, _ in box.calls].count("search_patient") == 1
    assert "patients match 'James Wilson'" not in out
