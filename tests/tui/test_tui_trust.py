"""What keeps a clinician from mistaking the demo model for advice: the standing notice, the
chart reminder under answers that used patient data, and an export of the conversation."""

from __future__ import annotations

import stat

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
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_the_demo_notice_stays_on_screen(tmp_path):
    app, _, _ = make_app(tmp_path, {})
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        notice = app.main.model_notice
        assert notice.display and notice.region.height == 1 and notice.region.width >= 60
        assert "DEMO MODEL: ANSWERS ARE NOT CLINICAL ADVICE" in str(notice.render())


async def test_an_answer_from_the_chart_carries_the_reminder_and_a_general_one_does_not(tmp_path):
    script = {IC: [intent()],  # the chart question is code's to route, the general one the model's
              TS: [{"tool_name": "get_patient_chart"}, {"patient_id": "abc-123"}],
              RC: [good()], SY: ["Hypertension is raised blood pressure."]}  # the chart's answer is code's
    app, _, _ = make_app(tmp_path, script, {"get_patient_chart": [{"result": chart()}] * 3})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        await ask(pilot, "Review the chart")
        await settle(pilot)
        await ask(pilot, "What is hypertension?")
        await settle(pilot)
        first, second = app.main.chat.messages()[1], app.main.chat.messages()[3]
        assert first.footnote and "verify it against the chart" in str(first.render())
        assert second.footnote is None and "verify" not in str(second.render())
        assert first.text.startswith("From the chart of John Smith")  # the answer itself is unchanged


async def test_a_session_exports_as_a_private_markdown_file(tmp_path):
    script = {IC: [intent("get_patient_chart")], TS: [{"tool_name": "get_patient_chart"}, {"patient_id": "abc-123"}],
              RC: [good()], SY: ["John Smith takes lisinopril."]}
    app, _, _ = make_app(tmp_path, script, {"get_patient_chart": [{"result": chart()}] * 3})
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+s")
        assert "Nothing to export" in app.notices[-1][1]
        app.open_patient("abc-123", "John Smith")
        await settle(pilot)
        await ask(pilot, "Review the chart")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
    exported = list((tmp_path / "exports").glob("session-*.md"))
    assert len(exported) == 1 and str(exported[0]) in app.notices[-1][1]
    text = exported[0].read_text()
    assert text.startswith("# Review the chart\n")
    assert "- Patient: abc-123" in text and "demo model: answers are not clinical advice" in text
    assert "## 1. Review the chart" in text and "From the chart of John Smith" in text
    assert "Consulting a source" in text and "Patient Record (patient: abc-123)" in text  # the trace, in words
    assert stat.S_IMODE(exported[0].stat().st_mode) == 0o600


def test_the_approval_dialog_shows_the_chart_the_safety_gate_read_without_reading_it_again(tmp_path):
    app, _, toolbox = make_app(tmp_path)
    app.tools = toolbox  # a read would be recorded in toolbox.calls
    gate_chart = chart("xyz-9", "Ann Lee")
    context = app._approval_context("prescribe_medication", {"patient_id": "xyz-9"}, gate_chart)
    assert context.patient.startswith("Ann Lee") and toolbox.calls == []
    # A chart for another patient is never shown: the dialog reads the one being written to.
    app._approval_context("prescribe_medication", {"patient_id": "abc-123"}, gate_chart)
    assert toolbox.calls == [("get_patient_chart", {"patient_id": "abc-123"})]
