"""Sessions as a clinician meets them: reopening one at start-up, a new context for another
patient, and a session list that names every patient a session touched (Pilot, scripted agent)."""

from __future__ import annotations

import pytest

from appliance.accounts.sessions import SessionStore
from tests.tui.helpers import (
    IC,
    RC,
    SIZE,
    SY,
    ask,
    chart,
    good,
    intent,
    make_app,
    ready,
    settle,
    texts,
)
from tui.app import startup_problem
from tui.screens.resume import session_line

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def saved_session(tmp_path, patient_id=None):
    store = SessionStore(tmp_path / "sessions.sqlite")
    session = store.create_session(model="gemma3-270m", patient_id=patient_id)
    store.add_exchange(session.id, "What is hypertension?", "Persistently raised arterial pressure.",
                       patient_id=patient_id, trace=[])
    return store, session


@pytest.mark.parametrize("resume", ["latest", "by-id"])
async def test_a_saved_session_reopens_at_start_up(tmp_path, resume):
    store, session = saved_session(tmp_path)
    app, _, _ = make_app(tmp_path, {}, resume=session.id if resume == "by-id" else "latest")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert texts(app) == ["What is hypertension?", "Persistently raised arterial pressure."]
        assert app.conversation.session.id == session.id
        assert app.conversation.history == [("user", "What is hypertension?"), ("assistant", "Persistently raised arterial pressure.")]


def test_an_unknown_session_is_refused_before_the_screen_starts(tmp_path):
    saved_session(tmp_path)
    assert startup_problem("latest", tmp_path / "sessions.sqlite") is None
    assert startup_problem("nope", tmp_path / "sessions.sqlite") == "cannot reopen session nope: that session no longer exists"


async def test_opening_another_patient_starts_a_new_context(tmp_path):
    # A summary of the open patient's care reads their chart (code's call), after the panel's own read.
    script = {IC: [intent(), intent()], RC: [good(), good()], SY: ["About John Smith.", "About Maria Garcia."]}
    tools = {"get_patient_chart": [{"result": chart("abc-123")}] * 2 + [{"result": chart("pat-002", "Maria Garcia")}] * 2}
    app, model, _ = make_app(tmp_path, script, tools)
    seen = []
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        original = app.agent.run_turn
        app.agent.run_turn = lambda q, **kw: (seen.append(kw), original(q, **kw))[1]
        app.open_patient("abc-123", "John Smith")
        await ask(pilot, "Summarise his diabetes care")
        await settle(pilot)
        first = app.conversation.session.id
        app.open_patient("pat-002", "Maria Garcia")
        await settle(pilot)
        assert app.conversation.session is None and app.conversation.history == [] and texts(app) == []
        assert any("new conversation" in text for _, text in app.notices)
        await ask(pilot, "Summarise her care")
        await settle(pilot)
        assert seen[-1]["history"] == []  # nothing of John Smith's conversation reaches the model
        assert app.conversation.session.id != first
        store = app.conversation.store
        assert store.get_session(first).patient_ids == ("abc-123",)
        assert store.get_session(app.conversation.session.id).patient_ids == ("pat-002",)
        # Reopening the same patient keeps the conversation.
        app.open_patient("pat-002", "Maria Garcia")
        await settle(pilot)
        assert len(app.conversation.history) == 2


def test_a_session_is_labelled_with_every_patient_it_touched(tmp_path):
    store, session = saved_session(tmp_path, patient_id="abc-123")
    trace = [{"node": "TOOL_EXECUTE", "tool": "get_patient_chart", "args": {"patient_id": "pat-011"}}]
    store.add_exchange(session.id, "And James Wilson?", "He is on lisinopril.", patient_id="abc-123", trace=trace)
    listed = store.get_session(session.id)
    assert listed.patient_ids == ("abc-123", "pat-011")
    line = session_line(listed)
    assert "2 patients abc-123, pat-011" in line and "2 exchanges" in line and "UTC" not in line
    single = store.create_session(patient_id=None)
    store.add_exchange(single.id, "q", "a")
    assert "1 exchange" in session_line(store.get_session(single.id))
    assert "patient" not in session_line(store.get_session(single.id))
