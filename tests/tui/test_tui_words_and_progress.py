"""The clinic terminal shows only checked answers, with progress that moves meanwhile; says
what a stopped turn wrote; and opens patients chosen in words or offered for a typo (Pilot)."""

from __future__ import annotations

import re

import pytest

from ehr_db.name_match import closest_sentence
from tests.tui.helpers import (
    IC,
    RC,
    SIZE,
    SY,
    THREE_WILSONS,
    TS,
    GatedModel,
    ask,
    chart,
    good,
    intent,
    make_app,
    ready,
    settle,
    texts,
    wait_until,
)
from tui.screens.patient_search import PatientSearchScreen
from tui.widgets.chat_message import ChatMessage

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def seconds(reply) -> int:
    found = re.search(r"… (\d+) s$", reply.text)
    return int(found.group(1)) if found else -1


@pytest.fixture
def screen_texts(monkeypatch):
    """Every text any chat message was ever given to show."""
    seen: list[str] = []
    original = ChatMessage.update

    def update(self, content="", **kw):
        seen.append(str(content))
        return original(self, content, **kw)

    monkeypatch.setattr(ChatMessage, "update", update)
    return seen


async def test_the_model_words_never_show_before_the_checks_and_progress_moves(tmp_path, screen_texts):
    unchecked = "Hypertension is raised blood pressure (pat-003 memer) over time."
    model = GatedModel({IC: [intent()], SY: [unchecked]})
    app, _, _ = make_app(tmp_path, tools={"get_patient_chart": [{"result": chart()}] * 3}, model=model)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        await ask(pilot, "What is hypertension?")
        await wait_until(pilot, model.first_piece.is_set, what="the model to start writing")
        reply = app.main.chat.messages()[-1]
        await wait_until(pilot, lambda: "Writing the answer… " in reply.text, what="the step in the progress line")
        app.turn.began -= 10
        await wait_until(pilot, lambda: seconds(reply) >= 10, what="ten seconds")
        shown = seconds(reply)
        app.turn.began -= 5
        await wait_until(pilot, lambda: seconds(reply) >= shown + 5, what="the clock to move with no event")
        model.release.set()
        await settle(pilot)
        await wait_until(pilot, lambda: app.turn is None, what="the answer")
        trace = app.main.trace
        shown_trace = [str(line.label) for turn in trace.root.children for event in turn.children
                       for line in [event, *event.children]]
    assert not any("pat-003" in text for text in screen_texts)  # another patient's ID never shown
    assert not any("memer" in text for text in screen_texts)
    assert any("withheld" in line for line in shown_trace)  # the guard withheld the wording ...
    assert not any("pat-003" in line for line in shown_trace)  # ... and the trace does not name the ID


async def test_stopping_after_an_approved_write_says_what_was_written(tmp_path):
    args = {"patient_id": "abc-123", "substance": "penicillin", "reaction": "hives", "severity": "moderate"}
    script = {IC: [intent("add_allergy")], TS: [{"tool_name": "add_allergy"}, dict(args)], RC: [good()], SY: ["Done."]}
    app, _, toolbox = make_app(tmp_path, script, {"get_patient_chart": [{"result": chart()}] * 3})
    original = toolbox.call

    def call(tool, a, deadline, **kw):
        outcome = original(tool, a, deadline, **kw) if tool != "add_allergy" else _written(toolbox, tool, a)
        if tool == "add_allergy":
            app.call_from_thread(app.action_cancel_turn)  # Escape right after the write
        return outcome

    toolbox.call = call
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        await ask(pilot, "Document a penicillin allergy with hives for abc-123")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "ApprovalScreen", what="the dialog")
        await pilot.press("ctrl+y")
        await wait_until(pilot, lambda: app.turn is None, what="the stopped turn")
        await settle(pilot)
        reply = app.main.chat.messages()[-1]
        assert reply.has_class("cancelled")
        assert "saved to the record before the stop: Allergy Documentation for abc-123" in reply.text
        assert "nothing else was written" in reply.text
        assert ("add_allergy", args) in toolbox.calls


def _written(toolbox, tool, args):
    from appliance.tools.base import ToolOutcome

    toolbox.calls.append((tool, dict(args)))
    return ToolOutcome(result={"id": "al-1"})


async def test_pull_up_a_shared_name_then_pick_in_words(tmp_path):
    tools = {"search_patient": [{"result": THREE_WILSONS}] * 2,
             "get_patient_chart": [{"result": chart("pat-012", "James Wilson")},
                                   {"result": chart("pat-011", "James Wilson")}]}
    app, model, toolbox = make_app(tmp_path, tools=tools)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "pull up james wilson")
        await wait_until(pilot, lambda: any("3 patients match" in t for t in texts(app)), what="the list")
        listing = texts(app)[-1]
        assert "  3. James Wilson, born 1960-06-01, ID pat-012" in listing
        await ask(pilot, "the one born 1960")
        await wait_until(pilot, lambda: app.conversation.patient_id == "pat-012", what="the pick")
        await ask(pilot, "James Wilson born 1950")
        await wait_until(pilot, lambda: app.conversation.patient_id == "pat-011", what="the name with a birth year")
        await settle(pilot)
        assert model.history == []  # code chose every time: no model call
        assert [a for t, a in toolbox.calls if t == "search_patient"] == [{"name": "james wilson"},
                                                                         {"name": "James Wilson"}]


async def test_a_typo_in_the_search_dialog_offers_the_closest_names(tmp_path):
    offer = closest_sentence([{"patient_id": "pat-006", "name": "Emily Johnson", "birth_date": "1984-06-02"}])
    tools = {"search_patient": [{"error_type": "not_found", "message": f"No patient named 'emily jonson' was found. {offer}"}],
             "get_patient_chart": [{"result": chart("pat-006", "Emily Johnson")}]}
    app, _, _ = make_app(tmp_path, tools=tools)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.action_patient()
        await wait_until(pilot, lambda: isinstance(app.screen, PatientSearchScreen), what="the dialog")
        await pilot.press(*"emily jonson", "enter")
        await wait_until(pilot, lambda: app.screen.matches, what="the offer")
        status = str(app.screen.query_one("#patient-search-status").render())
        assert "No exact match for 'emily jonson'; did you mean" in status and "did not work" not in status
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.conversation.patient_id == "pat-006", what="the offered patient to open")
