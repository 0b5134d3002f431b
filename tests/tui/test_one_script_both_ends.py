"""One script through both front ends, over the real record (the servers in process, on a data
home built by ``appliance init``) with the same scripted model: open a patient in words, ask
about their chart, open another, ask again, find a third by name and pick one, ask again; then
turns that settle on another patient by words (a question naming a patient's ID; the agent's own
"which one?" answered with "the second one"), each followed by another question. Then a write
approved and stopped right after it ran (scripted tools). The clinic terminal (Pilot) and the
line session (in process) are views over one conversation core (``appliance.conversation``), so
what each saved must be the same: the conversations, the patients each is about, and every
message with its words, status and patient."""

from __future__ import annotations

import pytest

from appliance.accounts.sessions import SessionStore
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from common import locations
from tests.line_session_driver import run_session
from tests.tui import test_tui_real_ehr
from tests.tui.helpers import (
    IC,
    SIZE,
    TS,
    WRITE_ARGS,
    WRITE_QUESTIONS,
    ask,
    chart,
    intent,
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
    # a turn reads another patient named by ID: that patient becomes current; the next question
    # starts a new conversation (the answer that named them stays in the one that asked)
    ("What medications is pat-004 on?", "What medications is pat-004 on?"),
    ("What allergies does he have?", "What allergies does he have?"),
    # the agent's own "which one?" (several matches: no patient current), answered in words
    ("Search for patient James Wilson", "Search for patient James Wilson"),
    ("the second one", "the second one"),
    ("What allergies does he have?", "What allergies does he have?"),
]
QUESTIONS = 8  # the lines that go to the agent


def script() -> dict:
    """The model only for the intent of the agent's search (the search for the one name read is
    code's call) and the reply to its "which one?" (intent, tool and arguments); every other
    question is about a patient's chart, so code routes it, makes the chart call and answers in
    its words (``appliance.agent.code_answers``); a model call beyond the script would be a
    failed turn."""
    return {IC: [intent("search_patient"), intent("get_patient_chart")],
            TS: [{"tool_name": "get_patient_chart"}, {"patient_id": "pat-003"}]}


def saved(store: SessionStore) -> list[dict]:
    """Every saved conversation, oldest first: its patients and its messages (the model's name
    and the times are each front end's own)."""
    return [{"patients": sorted(s.patient_ids), "patient": s.patient_id,
             "messages": [(m.role, m.text, m.kind, m.status, m.patient_id) for m in store.messages(s.id)]}
            for s in reversed(store.list_sessions())]


async def terminal(home_path) -> tuple[list[dict], ScriptedModel, list[tuple]]:
    """What the terminal saved, its model, and after each line what it showed: the open patient
    in the core, the banner and the chart pane, and how many messages the chat holds."""
    scripted = ScriptedModel(script())
    views = []
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
            views.append((app.conversation.patient_id, app.main.banner.patient_id, app.main.patient.patient_id,
                          len(texts(app))))
        said = [text for _, text in app.notices if "a new conversation has started" in text.lower()]
    assert len(said) == 4, said
    return saved(SessionStore(home_path / "terminal-sessions.sqlite")), scripted, views


async def test_the_terminal_and_the_line_session_save_the_same_conversations(home, tmp_path, monkeypatch):
    by_terminal, terminal_model, views = await terminal(home)

    out, _, line_model = run_session(monkeypatch, tmp_path, [line for _, line in SCRIPT] + ["/quit"],
                                     script(), box=InProcessToolBox())
    by_line_session = saved(SessionStore(locations.sessions_db_path()))

    assert [c["patients"] for c in by_terminal] == [
        ["abc-123"], ["pat-001"], ["pat-003", "pat-004"], ["pat-003", "pat-004"], ["pat-003"]]
    assert [c["patient"] for c in by_terminal] == ["abc-123", "pat-001", "pat-004", "pat-003", "pat-003"]
    assert [m[3] for c in by_terminal for m in c["messages"]] == ["complete"] * 2 * QUESTIONS
    assert "Sulfamethoxazole" in by_terminal[0]["messages"][1][1]  # John Smith's recorded allergy
    assert "Shellfish" in by_terminal[-1]["messages"][1][1]  # the second James Wilson's (pat-003)
    assert by_line_session == by_terminal
    assert out.count("A new conversation starts for") == 4
    # the terminal shows the patient a turn settled on at once (banner and chart pane); the chat
    # clears for the new conversation only when the next question is asked
    assert views[6:] == [
        ("pat-003", "pat-003", "pat-003", 4),  # "the one born 1967" opened pat-003, then a question
        ("pat-004", "pat-004", "pat-004", 6),  # the turn read pat-004: current, same chat
        ("pat-004", "pat-004", "pat-004", 2),  # the next question: a new conversation, the chat cleared
        (None, None, None, 4),  # several matches: no patient current
        ("pat-003", "pat-003", "pat-003", 6),
        ("pat-003", "pat-003", "pat-003", 2),
    ]
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
