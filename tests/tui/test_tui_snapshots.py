"""SVG snapshots of the clinic terminal at 100x30 with the scripted model (layout regressions).

Update after an intended change with: pytest tests/tui/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from tests.tui.helpers import (
    IC,
    RC,
    SIZE,
    SY,
    TS,
    ask,
    chart,
    good,
    intent,
    make_app,
    ready,
    settle,
    wait_until,
    write_script,
)
from tui.screens.approval import ApprovalScreen

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def frozen_agent_clock(monkeypatch):
    """Trace durations are real wall time; freeze the agent's clock so a loaded machine
    cannot turn "0.0 s" into "0.1 s" and fail a layout snapshot."""
    from types import SimpleNamespace

    from appliance.agent import graph
    from appliance.agent.nodes import tool_execute

    frozen = SimpleNamespace(perf_counter=lambda: 0.0)
    monkeypatch.setattr(graph, "time", frozen)
    monkeypatch.setattr(tool_execute, "time", frozen)
SAFETY = {"drug": "metformin", "boxed_warning": "Lactic acidosis; avoid in severe renal impairment."}


def answered_app(tmp_path):
    script = {IC: [intent("check_drug_safety")], TS: [{"tool_name": "check_drug_safety"}, {"drug_name": "metformin"}],
              RC: [good("Boxed warning returned.")],
              SY: ["Metformin carries a boxed warning for lactic acidosis; avoid it in severe renal impairment."]}
    tools = {"check_drug_safety": [{"result": SAFETY}], "get_patient_chart": [{"result": chart()}]}
    app, _, _ = make_app(tmp_path, script, tools)
    return app


async def open_patient_and_ask(pilot):
    await ready(pilot)
    pilot.app.open_patient("abc-123", "John Smith")
    await settle(pilot)
    await ask(pilot, "Check FDA warnings for metformin")
    await settle(pilot)


def test_main_screen(tmp_path, snap_compare):
    assert snap_compare(answered_app(tmp_path), terminal_size=SIZE, run_before=open_patient_and_ask)


def test_trace_panel_with_an_expanded_line(tmp_path, snap_compare):
    async def run_before(pilot):
        await open_patient_and_ask(pilot)
        trace = pilot.app.main.trace
        execute = [n for n in trace.root.children[0].children if n.data.node == "TOOL_EXECUTE"][0]
        trace.focus()
        trace.move_cursor(execute)
        await pilot.press("space")
        await pilot.pause()

    assert snap_compare(answered_app(tmp_path), terminal_size=SIZE, run_before=run_before)


def test_approval_dialog(tmp_path, snap_compare, monkeypatch):
    monkeypatch.setenv("APPLIANCE_USER", "Dr. Ada Okafor")  # the author line, the same on every machine
    app, _, _ = make_app(tmp_path, write_script("prescribe_medication", approved=True),
                         {"get_patient_chart": [{"result": chart()}] * 2})  # the safety gate, the dialog

    async def run_before(pilot):
        await ready(pilot)
        await ask(pilot, "Prescribe metformin 500 mg twice daily for abc-123")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ApprovalScreen), what="the dialog")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_help_screen(tmp_path, snap_compare):
    app, _, _ = make_app(tmp_path)

    async def run_before(pilot):
        await ready(pilot)
        await pilot.press("f1")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_main_screen_at_80x24_on_a_16_colour_console(tmp_path, snap_compare):
    """The 16-colour ANSI theme (Textual 8 names it "ansi-dark"; older releases "textual-ansi")
    at the smallest supported size: every state must still read in words."""

    async def run_before(pilot):
        pilot.app.theme = "ansi-dark"
        await open_patient_and_ask(pilot)

    assert snap_compare(answered_app(tmp_path), terminal_size=(80, 24), run_before=run_before)
