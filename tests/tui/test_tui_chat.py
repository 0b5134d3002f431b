"""The clinic terminal with a scripted model: checked answers and progress, clarification, cancel, errors,
model loading, resuming sessions (Pilot)."""

from __future__ import annotations

import threading

import pytest

from appliance.accounts.sessions import SessionStore
from appliance.errors import ModelFileError
from appliance.llm.fake import ScriptedModel
from tests.tui.helpers import (
    IC,
    RC,
    SIZE,
    SY,
    THREE_WILSONS,
    TS,
    GatedModel,
    ask,
    intent,
    make_app,
    ready,
    settle,
    texts,
    wait_until,
)
from tui import events
from tui.screens.resume import SessionsScreen

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
ANSWER = "Hypertension is persistently raised arterial blood pressure."


async def test_question_gets_its_answer_whole_once_checked(tmp_path):
    finished: list[str] = []

    def hook(message):
        if isinstance(message, events.TurnFinished):
            finished.append(message.result.response)

    app, model, _ = make_app(tmp_path, {IC: [intent()], SY: [ANSWER]})
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await ready(pilot)
        await ask(pilot, "What is hypertension?")
        await settle(pilot)
        assert texts(app) == ["What is hypertension?", ANSWER]
        reply = app.main.chat.messages()[-1]
        assert reply.kind == "answer" and reply.has_class("answer")
        assert finished == [ANSWER]  # one finished answer, no pieces posted before it
        assert [e.node for e in app.main.trace.events(1)] == ["INPUT_ASSEMBLY", IC, SY]
        assert app.conversation.history == [("user", "What is hypertension?"), ("assistant", ANSWER)]
        assert model.pending() == {}


async def test_history_carries_over_to_the_next_question(tmp_path):
    app, model, _ = make_app(tmp_path, {IC: [intent(), intent()], SY: [ANSWER, "Start with lifestyle changes."]})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "What is hypertension?")
        await settle(pilot)
        await ask(pilot, "And how is it treated?")
        await settle(pilot)
        synthesis = [c for c in model.history if c.node == SY][-1]
        contents = [m.content for m in synthesis.messages]
        assert "What is hypertension?" in contents and ANSWER in contents
        assert texts(app)[-1] == "Start with lifestyle changes."


async def test_clarification_looks_different_from_an_answer(tmp_path):
    script = {IC: [intent("search_patient")], TS: [{"tool_name": "search_patient"}, {"name": "James Wilson"}],
              RC: [{"quality": "success_partial", "brief_summary": "Three matches."}]}
    app, _, toolbox = make_app(tmp_path, script, {"search_patient": [{"result": THREE_WILSONS}]})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "Find patient James Wilson")
        await settle(pilot)
        reply = app.main.chat.messages()[-1]
        assert reply.kind == "clarification" and reply.has_class("clarification")
        assert reply.border_title != "Assistant"
        assert all(f"pat-01{i}" in reply.text for i in range(3))
        assert app.conversation.session is not None
        stored = SessionStore(tmp_path / "sessions.sqlite").messages(app.conversation.session.id)
        assert stored[-1].kind == "clarification"


async def test_cancelling_a_turn_stops_generation_and_keeps_the_session_consistent(tmp_path):
    model = GatedModel({IC: [intent(), intent()], SY: ["Raised blood pressure over time.", "Second answer."]})
    app, _, _ = make_app(tmp_path, model=model)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "What is hypertension?")
        await wait_until(pilot, model.first_piece.is_set, what="the first piece")
        await wait_until(pilot, lambda: "Writing the answer… " in app.main.chat.messages()[-1].text,
                         what="the progress line")
        assert "Raised" not in app.main.chat.messages()[-1].text  # the unchecked words never show
        assert app.turn is not None
        await pilot.press("escape")
        await settle(pilot)
        reply = app.main.chat.messages()[-1]
        assert app.turn is None and reply.has_class("cancelled")
        assert "Raised" not in reply.text and "nothing was written to the record" in reply.text
        assert app.conversation.history == []  # a cancelled answer is never context
        stored = SessionStore(tmp_path / "sessions.sqlite").messages(app.conversation.session.id)
        assert [m.status for m in stored] == ["cancelled", "cancelled"]
        # the terminal keeps working, and the next turn sees no trace of the cancelled one
        model.release.set()
        await ask(pilot, "Another question")
        await settle(pilot)
        assert texts(app)[-1] == "Second answer."
        assert app.conversation.history == [("user", "Another question"), ("assistant", "Second answer.")]
        assert SessionStore(tmp_path / "sessions.sqlite").history(app.conversation.session.id) == app.conversation.history


async def test_questions_wait_for_the_model_while_it_loads(tmp_path):
    loaded = threading.Event()
    model = ScriptedModel({IC: [intent()], SY: [ANSWER]})

    def slow_loader(settings, progress):
        assert loaded.wait(20), "the test never released the model"
        return model

    app, _, _ = make_app(tmp_path, model_loader=slow_loader)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        status = app.main.status
        assert status.load_state == "loading" and "loading" in status.model_text().plain
        assert status.query_one("#status-progress").display
        await ask(pilot, "What is hypertension?")  # the UI is usable while the model loads
        reply = app.main.chat.messages()[-1]
        assert "Waiting for the model" in reply.text
        assert any("still loading" in text for _, text in app.notices)
        loaded.set()
        await wait_until(pilot, lambda: app.turn is None, what="the queued question to be answered")
        await settle(pilot)
        assert status.load_state == "ready" and not status.query_one("#status-progress").display
        assert texts(app)[-1] == ANSWER


async def test_a_model_that_cannot_load_is_a_notice_not_a_crash(tmp_path):
    def broken(settings, progress):
        raise ModelFileError("model file missing: models/x.gguf")

    app, _, _ = make_app(tmp_path, model_loader=broken)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.main.status.load_state == "failed"
        assert any("model file missing" in text and sev == "error" for sev, text in app.notices)
        await ask(pilot, "What is hypertension?")
        assert app.is_running and app.turn is None
        assert app.main.prompt.value == "What is hypertension?"  # kept for when the model is fixed


async def test_model_and_tool_errors_become_notices(tmp_path):
    model = ScriptedModel({IC: [RuntimeError("llama.cpp exploded")]})
    app, _, _ = make_app(tmp_path, model=model)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "What is hypertension?")
        await settle(pilot)
        assert app.is_running and app.turn is None
        assert app.main.chat.messages()[-1].has_class("failed")
        assert any("RuntimeError" in text for sev, text in app.notices if sev == "error")
        # the chart tool has nothing scripted: the failure is a notice and a message in the panel
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        assert "could not be loaded" in str(app.main.patient.query_one("#patient-body").render())
        assert any("chart could not be loaded" in text for _, text in app.notices)


async def test_a_session_database_problem_is_a_notice(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    app, _, _ = make_app(tmp_path, {IC: [intent()], SY: [ANSWER]})
    app._sessions_path = blocker / "sessions.sqlite"
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.conversation.store is None and any("not be saved" in text for _, text in app.notices)
        await ask(pilot, "What is hypertension?")
        await settle(pilot)
        assert texts(app)[-1] == ANSWER


async def test_resuming_a_session_after_a_restart(tmp_path):
    app, _, _ = make_app(tmp_path, {IC: [intent()], SY: [ANSWER]})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await ask(pilot, "What is hypertension?")
        await settle(pilot)
        first_id = app.conversation.session.id
        await pilot.press("ctrl+q")

    seen: list[dict] = []
    app2, _, toolbox = make_app(tmp_path, {IC: [intent()], SY: ["Lifestyle first."]},
                                {"get_patient_chart": [{"result": {"patient": {"name": "John Smith"}}}]})
    async with app2.run_test(size=SIZE) as pilot:
        await ready(pilot)
        original = app2.agent.run_turn
        app2.agent.run_turn = lambda q, **kw: (seen.append(kw), original(q, **kw))[1]
        assert texts(app2) == []
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: isinstance(app2.screen, SessionsScreen), what="the session list")
        await pilot.press("enter")
        await settle(pilot)
        assert app2.conversation.session.id == first_id
        assert texts(app2) == ["What is hypertension?", ANSWER]
        assert app2.conversation.patient_id == "abc-123"
        assert [e.node for e in app2.main.trace.events(1)][-1] == SY  # the stored trace is back
        await ask(pilot, "And the treatment?")
        await settle(pilot)
        assert seen[-1]["history"] == [("user", "What is hypertension?"), ("assistant", ANSWER)]
        assert seen[-1]["patient_id"] == "abc-123"
        assert SessionStore(tmp_path / "sessions.sqlite").get_session(first_id).message_count == 4


async def test_new_session_is_one_key(tmp_path):
    app, _, _ = make_app(tmp_path, {IC: [intent()], SY: [ANSWER]})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "What is hypertension?")
        await settle(pilot)
        old = app.conversation.session.id
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert texts(app) == [] and app.conversation.history == [] and app.conversation.session is None
        assert SessionStore(tmp_path / "sessions.sqlite").get_session(old).message_count == 2
