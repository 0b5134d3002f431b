"""One script through both front ends, over the real record (the servers in process, on a data
home built by ``appliance init``) with the same scripted model: open a patient in words, ask
about their chart, open another, ask again, find a third by name and pick one, ask again. Then
a write approved and stopped right after it ran (scripted tools). The clinic terminal (Pilot)
and the line session (in process) are views over one conversation core
(``appliance.conversation``), so what each saved must be the same: the conversations, the
patients each is about, and every message with its words, status and patient."""

from __future__ import annotations

import pytest

from appliance.accounts.sessions import SessionStore
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from common import locations
from tests.line_session_driver import run_session
from tests.tui import test_tui_real_ehr
from tests.tui.helpers import (
    SIZE,
    WRITE_ARGS,
    WRITE_QUESTIONS,
    ask,
    chart,
    make_app,
    ready,
    settle,
    texts,
    wait_until,
    write_script,
)
from tests.tui.test_tui_real_ehr import InProcessToolBox
from tui.app import ClinicApp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
home = test_tui_real_ehr.home  # the real record's fixture, shared

# (what the terminal's clinician types, what the line session's types): the same request
SCRIPT = [
    ("pull up John Smith", "pull up John Smith"),
    ("What allergies does he have?", "What allergies does he have?"),
    ("pull up Maria Garcia", "/patient pat-001"),
    ("What medications is she on?", "What medications is she on?"),
    ("pull up James Wilson", "/find James Wilson"),
    ("the one born 1967", "the one born 1967"),
    ("What allergies does he have?", "What allergies does he have?"),
]
QUESTIONS = 3  # the lines that go to the agent


def script() -> dict:
    """No model call: each question is about the current patient's chart, so code routes it,
    makes the chart call and answers in its words (``appliance.agent.code_answers``); a model
    call would be a failed turn."""
    return {}


def saved(store: SessionStore) -> list[dict]:
    """Every saved conversation, oldest first: its patients and its messages (the model's name
    and the times are each front end's own)."""
    return [{"patients": sorted(s.patient_ids), "patient": s.patient_id,
             "messages": [(m.role, m.text, m.kind, m.status, m.patient_id) for m in store.messages(s.id)]}
            for s in reversed(store.list_sessions())]


async def terminal(home_path) -> tuple[list[dict], ScriptedModel]:
    scripted = ScriptedModel(script())
    tools = InProcessToolBox()
    app = ClinicApp(Settings(), model_loader=lambda settings, progress: scripted, tools_factory=lambda: tools,
                    sessions_path=home_path / "terminal-sessions.sqlite", cursor_blink=False, health_interval=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        for typed, _ in SCRIPT:
            await ask(pilot, typed)
            await settle(pilot)  # a choice in words or the turn: each runs in a worker
            await wait_until(pilot, lambda: app.turn is None, what=f"the reply to {typed!r}")
            await settle(pilot)
            assert texts(app)[-2:][0] == typed  # the line and its reply are the chat's last
    return saved(SessionStore(home_path / "terminal-sessions.sqlite")), scripted


async def test_the_terminal_and_the_line_session_save_the_same_conversations(home, tmp_path, monkeypatch):
    by_terminal, terminal_model = await terminal(home)

    out, _, line_model = run_session(monkeypatch, tmp_path, [line for _, line in SCRIPT] + ["/quit"],
                                     script(), box=InProcessToolBox())
    by_line_session = saved(SessionStore(locations.sessions_db_path()))

    assert [c["patients"] for c in by_terminal] == [["abc-123"], ["pat-001"], ["pat-003"]]
    assert [m[3] for c in by_terminal for m in c["messages"]] == ["complete"] * 2 * QUESTIONS
    assert "Sulfamethoxazole" in by_terminal[0]["messages"][1][1]  # John Smith's recorded allergy
    assert by_line_session == by_terminal
    assert out.count("A new conversation starts for") == 2
    assert terminal_model.pending() == line_model.pending() == {}


async def test_a_write_stopped_after_it_ran_is_saved_alike(tmp_path, monkeypatch):
    """Approve a documented allergy, then stop the turn right after the record took it (the
    terminal's Escape, the line session's Ctrl+C): both save the same stopped exchange, in the
    core's words from the turn's trace."""
    tools = {"get_patient_chart": [{"result": chart()}] * 3, "add_allergy": [{"result": {"id": "al-1"}}]}
    app, _, toolbox = make_app(tmp_path / "terminal", write_script("add_allergy", approved=True), tools)
    (tmp_path / "terminal").mkdir()
    call = toolbox.call

    def escape_after_the_write(tool, args, deadline, **kw):
        outcome = call(tool, args, deadline, **kw)
        if tool == "add_allergy":
            app.call_from_thread(app.action_cancel_turn)
        return outcome

    toolbox.call = escape_after_the_write
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        await ask(pilot, WRITE_QUESTIONS["add_allergy"])
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "ApprovalScreen", what="the dialog")
        await pilot.press("ctrl+y")
        await wait_until(pilot, lambda: app.turn is None, what="the stopped turn")
        await settle(pilot)
    by_terminal = saved(SessionStore(tmp_path / "terminal" / "sessions.sqlite"))

    lines = ["/patient abc-123", WRITE_QUESTIONS["add_allergy"], "y", "/quit"]
    _, box, _ = run_session(monkeypatch, tmp_path / "line", lines, write_script("add_allergy", approved=True), tools,
                            interrupt_after="add_allergy")
    by_line_session = saved(SessionStore(locations.sessions_db_path()))

    assert [args for tool, args in box.calls if tool == "add_allergy"] == [WRITE_ARGS["add_allergy"]]
    (conversation,) = by_terminal
    assert conversation["messages"][1] == (
        "assistant", "(cancelled by the clinician; saved to the record before the stop: "
        "Allergy Documentation for abc-123; nothing else was written)", "answer", "cancelled", "abc-123")
    assert by_line_session == by_terminal
