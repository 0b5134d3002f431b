"""/prescreen in the line session, in process with scripted tools: the current patient's prescreen
is printed, saved as a complete exchange and is context for follow-up questions, as the
terminal's F6 answer is (both go through ``Conversation.answered``)."""

from __future__ import annotations

import pytest

from appliance.accounts.sessions import SessionStore
from appliance.agent.graph import Agent
from appliance.conversation import Conversation
from tests.line_session_driver import run_session
from tests.tui.helpers import IC, SY, chart, intent
from tests.tui.test_tui_prescreen import DETAILS, SCRIPT, SEARCH

pytestmark = pytest.mark.timeout(60)


def test_a_prescreen_is_saved_and_is_context(monkeypatch, tmp_path):
    tools = {"get_patient_chart": [{"result": chart()}, {"result": chart()}],
             "find_clinical_trials": [{"result": SEARCH}], "get_trial_details": [{"result": DETAILS}]}
    histories: list = []
    run_turn = Agent.run_turn
    monkeypatch.setattr(Agent, "run_turn", lambda self, question, **kw: (
        histories.append(list(kw["history"])), run_turn(self, question, **kw))[1])
    lines = ["/patient abc-123", "/prescreen", "What is hypertension?", "/quit"]
    out, box, model = run_session(monkeypatch, tmp_path, lines, {**SCRIPT, IC: [intent()], SY: ["Raised pressure."]},
                                  tools)
    assert "1. ELIGIBLE  NCT-DEMO-0002" in out and model.pending() == {}
    (session,) = SessionStore().list_sessions()
    question, answer, *_ = SessionStore().messages(session.id)
    assert (question.text, answer.status, answer.patient_id) == ("/prescreen", "complete", "abc-123")
    assert "1. ELIGIBLE  NCT-DEMO-0002" in answer.text and answer.text in out
    assert histories == [[("user", "/prescreen"), ("assistant", answer.text)]]  # the follow-up's context
    resumed = Conversation("test", SessionStore())
    resumed.resume("latest")
    assert resumed.history[:2] == [("user", "/prescreen"), ("assistant", answer.text)]
