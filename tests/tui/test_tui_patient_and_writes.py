"""Patient selection and write approval in the clinic terminal (Pilot, scripted agent)."""

from __future__ import annotations

import threading

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets import Button, Input, OptionList, TextArea

from appliance.accounts.sessions import SessionStore
from mcp_servers.contracts import TOOL_LABELS
from tests.tui.helpers import (
    IC,
    OVERRIDE_REASON,
    RC,
    SIZE,
    SY,
    THREE_WILSONS,
    TS,
    WRITE_ARGS,
    WRITE_QUESTIONS,
    approve,
    ask,
    chart,
    good,
    intent,
    make_app,
    ready,
    settle,
    texts,
    wait_until,
    write_script,
)
from tui.screens.approval import ApprovalScreen
from tui.screens.patient_search import PatientSearchScreen

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
WRITE_TOOLS = list(WRITE_ARGS)


def calls_of(toolbox, tool):
    """The calls of ``tool`` with the arguments approved (a prescription's sig is code's reading of them)."""
    return [{k: v for k, v in args.items() if k != "sig"} for name, args in toolbox.calls if name == tool]


async def open_approval(pilot, tool):
    await ask(pilot, WRITE_QUESTIONS[tool])
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ApprovalScreen), what="the approval dialog")
    return pilot.app.screen


def patient_block(screen) -> str:
    return str(screen.query_one("#approval-patient").render())


def field_value(screen, name):
    widget = screen.query_one(f"#arg-{name}")
    return widget.text if isinstance(widget, TextArea) else widget.value


async def test_selecting_a_patient_among_three_with_the_same_name(tmp_path):
    script = {IC: [intent("get_patient_chart")], TS: [{"tool_name": "get_patient_chart"}, {"patient_id": "pat-011"}],
              RC: [good()], SY: ["James Wilson (1950): hypertension, on lisinopril."]}
    tools = {"search_patient": [{"result": THREE_WILSONS}],
             "get_patient_chart": [{"result": chart("pat-011", "James Wilson")}, {"result": chart("pat-011", "James Wilson")}]}
    app, _, toolbox = make_app(tmp_path, script, tools)
    seen = []
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        original = app.agent.run_turn
        app.agent.run_turn = lambda q, **kw: (seen.append(kw), original(q, **kw))[1]
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, PatientSearchScreen), what="the search dialog")
        await pilot.press(*"James Wilson", "enter")
        options = app.screen.query_one(OptionList)
        await wait_until(pilot, lambda: options.option_count == 3, what="three matches")
        lines = [str(options.get_option_at_index(i).prompt) for i in range(3)]
        assert all("James Wilson" in line for line in lines)
        assert [f"born 19{40 + 10 * i}-06-01" in lines[i] for i in range(3)] == [True] * 3
        await pilot.press("down", "enter")  # the second James Wilson
        await settle(pilot)
        assert app.conversation.patient_id == "pat-011"
        body = str(app.main.patient.query_one("#patient-body").render())
        assert body.index("ALLERGIES") < body.index("ACTIVE PROBLEMS") < body.index("MEDICATIONS")
        assert "Penicillin" in body and "Essential hypertension" in body and "Hemoglobin A1c" in body
        assert toolbox.calls[:2] == [("search_patient", {"name": "James Wilson"}),
                                     ("get_patient_chart", {"patient_id": "pat-011"})]
        await ask(pilot, "Review this patient's chart")
        await settle(pilot)
        assert seen[-1]["patient_id"] == "pat-011"
        # the agent's call used the selected ID, which is grounded only because it was passed
        assert calls_of(toolbox, "get_patient_chart") == [{"patient_id": "pat-011"}] * 2
        await pilot.press("ctrl+l")
        await pilot.pause()
        assert app.conversation.patient_id is None and app.main.patient.patient_id is None


@pytest.mark.parametrize("tool", WRITE_TOOLS)
async def test_a_write_runs_only_after_approve(tmp_path, tool):
    gate = [{"result": chart()}] if tool == "prescribe_medication" else []  # the safety gate reads the chart
    tools = {tool: [{"result": {"id": "new-1", "status": "active"}}],
             "get_patient_chart": [{"result": chart()}, *gate, {"result": chart(meds=("lisinopril", "metformin"))}]}
    app, model, toolbox = make_app(tmp_path, write_script(tool, approved=True), tools)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        screen = await open_approval(pilot, tool)
        for name, value in WRITE_ARGS[tool].items():  # the exact arguments are shown
            if name == "patient_id":  # fixed: shown with the patient's name, not editable
                assert "John Smith" in patient_block(screen) and "(abc-123)" in patient_block(screen)
                assert "NOT the open patient" not in patient_block(screen)
                assert not screen.query("#arg-patient_id")
                continue
            assert field_value(screen, name) == ("" if value is None else value)
        assert calls_of(toolbox, tool) == []  # nothing written while the dialog is open
        await approve(pilot)
        await settle(pilot)
        assert calls_of(toolbox, tool) == [WRITE_ARGS[tool]]
        assert "The record was changed." in texts(app)[-1]  # code's words: what was written
        if tool == "prescribe_medication":  # the safety check's findings lead the answer, as in `ask`
            assert texts(app)[-1].startswith("Medication safety check: metformin 500 mg twice daily for abc-123")
        assert model.pending() == {}
        # after a successful write to the open patient, the chart is reloaded
        assert calls_of(toolbox, "get_patient_chart") == [{"patient_id": "abc-123"}] * (2 + len(gate))


async def test_a_write_to_a_patient_who_is_not_open_says_so(tmp_path):
    """As the line session's prompt does (the conversation core's ``asked``): the dialog names
    the patient written to and says they are not the open one."""
    tools = {"get_patient_chart": [{"result": chart("pat-002", "Maria Garcia")}, {"result": chart()}]}
    app, _, toolbox = make_app(tmp_path, write_script("add_allergy", approved=False), tools)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_patient("pat-002", "Maria Garcia")
        await settle(pilot)
        screen = await open_approval(pilot, "add_allergy")  # for abc-123
        assert "John Smith" in patient_block(screen) and "NOT the open patient" in patient_block(screen)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.turn is None, what="the rejection")
        assert calls_of(toolbox, "add_allergy") == []


@pytest.mark.parametrize("tool", WRITE_TOOLS)
async def test_a_stray_enter_in_the_approval_dialog_writes_nothing(tmp_path, tool):
    app, _, toolbox = make_app(tmp_path, write_script(tool, approved=True), {tool: [{"result": {"id": "new-1"}}]})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = await open_approval(pilot, tool)
        await pilot.press("enter", "enter")
        await pilot.pause()
        assert app.screen is screen and calls_of(toolbox, tool) == []
        first = [name for name in WRITE_ARGS[tool] if name != "patient_id"][0]
        assert app.focused is screen.query_one(f"#arg-{first}")  # not the Approve button, not the patient
        # approving takes an explicit act: focus on the Approve button, then Enter (with an
        # override's reason where the policy asks for one)
        if screen.is_override:
            screen.query_one("#approval-reason", Input).value = OVERRIDE_REASON
        screen.query_one("#approve", Button).focus()
        await pilot.press("enter")
        await settle(pilot)
        assert calls_of(toolbox, tool) == [WRITE_ARGS[tool]]


async def test_a_click_on_approve_approves(tmp_path):
    tool = "add_allergy"
    app, _, toolbox = make_app(tmp_path, write_script(tool, approved=True), {tool: [{"result": {"id": "new-1"}}]})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await open_approval(pilot, tool)
        await pilot.click("#approve")
        await settle(pilot)
        assert calls_of(toolbox, tool) == [WRITE_ARGS[tool]]


@pytest.mark.parametrize("tool", WRITE_TOOLS)
@pytest.mark.parametrize("key", ["ctrl+r", "escape"])
async def test_a_rejected_write_never_runs(tmp_path, tool, key):
    app, model, toolbox = make_app(tmp_path, write_script(tool, approved=False))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = await open_approval(pilot, tool)
        screen.query_one("#approval-reason", Input).value = "wrong patient"
        await pilot.press(key)
        await settle(pilot)
        assert calls_of(toolbox, tool) == []
        assert texts(app)[-1].endswith("The record was not changed.")
        execute = [e for e in app.main.trace.events(1) if e.node == "TOOL_EXECUTE"][0]
        assert execute.output["error_type"] == "rejected_by_user"
        assert model.pending() == {}
        # code's answer at once: the rejection and the clinician's reason, no model call
        label = TOOL_LABELS[tool]
        assert f"did not approve the {label}; nothing was written. Reason given: wrong patient." in texts(app)[-1]
        assert SY not in [c.node for c in model.history]


@pytest.mark.parametrize("key", ["ctrl+r", "escape"])
async def test_a_rejection_without_a_reason_claims_none(tmp_path, key):
    tool = "add_allergy"
    app, model, toolbox = make_app(tmp_path, write_script(tool, approved=False))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await open_approval(pilot, tool)
        await pilot.press(key)
        await settle(pilot)
        answer = texts(app)[-1]
        assert "did not approve the Allergy Documentation; nothing was written." in answer
        assert "Reason given" not in answer and calls_of(toolbox, tool) == []


async def test_an_edited_argument_is_revalidated(tmp_path):
    tool = "add_allergy"
    app, _, toolbox = make_app(tmp_path, write_script(tool, approved=True),
                               {tool: [{"result": {"id": "new-1"}}]})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = await open_approval(pilot, tool)
        screen.query_one("#arg-severity", Input).value = "extreme"
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert app.screen is screen  # refused: the dialog stays open with a message
        error = str(screen.query_one("#approval-error").render())
        assert "severity" in error and "Not approved" in error
        assert calls_of(toolbox, tool) == []
        screen.query_one("#arg-severity", Input).value = "severe"
        screen.query_one("#arg-reaction", Input).value = "anaphylaxis"
        await pilot.press("ctrl+y")
        await settle(pilot)
        assert calls_of(toolbox, tool) == [{**WRITE_ARGS[tool], "severity": "severe", "reaction": "anaphylaxis"}]


async def test_the_approval_dialog_names_the_patient_the_action_and_the_author(tmp_path):
    from common.operator import operator_name

    tool = "prescribe_medication"
    tools = {tool: [{"result": {"id": "new-1"}}], "get_patient_chart": [{"result": chart()}] * 2}
    app, _, toolbox = make_app(tmp_path, write_script(tool, approved=True), tools)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)  # no patient open: the dialog reads the chart of the patient written to
        screen = await open_approval(pilot, tool)
        action = str(screen.query_one("#approval-action").render())
        assert action == "Prescribe metformin 500 mg twice daily"
        block = patient_block(screen)
        assert "John Smith · 67 y · male" in block and "(abc-123)" in block
        assert "ALLERGIES: Penicillin (Hives, moderate)" in block
        assert f"Author: {operator_name()}" in block
        findings = str(screen.query_one("#approval-findings").render())
        assert findings.startswith("Safety checks:")
        intro = str(screen.query_one("#approval-intro").render())
        assert tool not in intro and "arguments" not in intro  # no internal wording
        assert calls_of(toolbox, "get_patient_chart") == [{"patient_id": "abc-123"}] * 2  # the gate, the dialog
        await approve(pilot)
        await settle(pilot)
        assert calls_of(toolbox, tool) == [WRITE_ARGS[tool]]  # for the patient shown


async def test_the_approval_dialog_says_when_the_chart_could_not_be_read(tmp_path):
    tool = "add_allergy"
    tools = {tool: [{"result": {"id": "new-1"}}],
             "get_patient_chart": [{"error_type": "service_unavailable", "message": "down"}]}
    app, _, _ = make_app(tmp_path, write_script(tool, approved=True), tools)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = await open_approval(pilot, tool)
        assert "Allergies: unknown (the chart could not be read)" in patient_block(screen)
        assert str(screen.query_one("#approval-action").render()) == \
            "Record an allergy to penicillin: hives, moderate"
        assert not screen.query("#approval-findings")  # safety findings are a prescription's


async def test_quitting_during_approval_writes_nothing(tmp_path):
    tool = "save_clinical_note"
    app, _, toolbox = make_app(tmp_path, write_script(tool, approved=True), {tool: [{"result": {"id": "n"}}]})
    decided = threading.Event()
    decisions = []

    def recording(name, args, safety=None):
        decisions.append(app.bridge(name, args, safety))
        decided.set()
        return decisions[-1]

    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.agent.approver = recording
        await open_approval(pilot, tool)
        await pilot.press("ctrl+q")
    assert decided.wait(10), "the worker never got a decision"
    assert decisions[0].approved is False
    assert calls_of(toolbox, tool) == []


async def test_cancelling_after_an_approved_write_reloads_the_chart_and_says_it_was_saved(tmp_path):
    tool = "prescribe_medication"
    tools = {tool: [{"result": {"id": "new-1", "status": "active"}}],
             "get_patient_chart": [{"result": chart()}] * 2 + [{"result": chart(meds=("lisinopril", "metformin"))}]}
    app, _, toolbox = make_app(tmp_path, write_script(tool, approved=True), tools)
    real_call, wrote, release = toolbox.call, threading.Event(), threading.Event()

    def slow_answer(name, args, deadline, **kw):  # the record wrote; the answer is not back yet
        outcome = real_call(name, args, deadline, **kw)
        if name == tool:
            wrote.set()
            release.wait(10)
        return outcome

    toolbox.call = slow_answer
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        await open_approval(pilot, tool)
        await approve(pilot)
        await wait_until(pilot, wrote.is_set, what="the write")
        await pilot.press("escape")
        release.set()
        await settle(pilot)
        assert app.turn is None and calls_of(toolbox, tool) == [WRITE_ARGS[tool]]
        assert calls_of(toolbox, "get_patient_chart") == [{"patient_id": "abc-123"}] * 3  # gate, then reloaded
        assert "metformin" in str(app.main.patient.query_one("#patient-body").render())
        severity, notice = app.notices[-1]
        assert "cancelled" in notice and "saved to the record" in notice
        reply = app.main.chat.messages()[-1]
        assert reply.has_class("cancelled") and "saved to the record" in reply.text
        stored = SessionStore(tmp_path / "sessions.sqlite").messages(app.conversation.session.id)
        assert [m.status for m in stored] == ["cancelled", "cancelled"]
        assert "saved to the record" in stored[-1].text and app.conversation.history == []


async def test_cancelling_the_turn_while_approval_is_open_dismisses_the_dialog(tmp_path):
    tool = "add_allergy"
    app, _, toolbox = make_app(tmp_path, write_script(tool, approved=True), {tool: [{"result": {"id": "a"}}]})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await open_approval(pilot, tool)
        await pilot.press("ctrl+p")  # the command palette works over the dialog
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press(*"Stop the answer")
        await wait_until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, what="palette hits")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.turn is None, what="the cancelled turn to end")
        await settle(pilot)
        assert not any(isinstance(s, ApprovalScreen) for s in app.screen_stack)
        assert app.screen is app.main and calls_of(toolbox, tool) == []
        assert app.main.chat.messages()[-1].has_class("cancelled")
        assert "saved" not in app.notices[-1][1]


def banner(app) -> str:
    return str(app.main.banner.render())


@pytest.mark.parametrize("allergies, expected", [
    ([{"substance": "Penicillin", "reaction": "Hives", "severity": "moderate"}], "ALLERGIES: Penicillin (Hives, moderate)"),
    ([], "Allergies: allergies not recorded"),
    ([{"substance": "No known allergy", "substance_code": "716186003"}], "Allergies: no known allergies"),
    ([{"substance": "NKDA"}], "Allergies: no known drug allergies"),
])
async def test_the_banner_keeps_the_open_patient_and_allergies_in_sight(tmp_path, allergies, expected):
    record = {**chart(), "allergies": allergies}
    app, _, _ = make_app(tmp_path, {}, {"get_patient_chart": [{"result": record}]})
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert not app.main.banner.display
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        assert app.main.banner.display and app.main.banner.region.height >= 2
        assert banner(app).splitlines() == ["John Smith · 67 y · male · MRN DEMO-000123", expected]
        body = str(app.main.patient.query_one("#patient-body").render())
        assert "none recorded\n" not in body.split("ACTIVE PROBLEMS")[0]  # the panel words it the same way
        app.main.trace.focus()  # still in sight whatever has focus
        await pilot.press("ctrl+l")
        await settle(pilot)
        assert not app.main.banner.display
