"""The approval dialog fits an 80x24 terminal with its Approve and Reject buttons on screen,
however long the safety findings, for a prescription with findings and for an override with
its reason and password fields (Pilot)."""

from __future__ import annotations

import pytest

from tests.tui.helpers import make_app, ready, wait_until
from tui.approval import ApprovalContext
from tui.screens.approval import ApprovalScreen

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
ORDER = {"patient_id": "pat-005", "medication_name": "ibuprofen", "dosage": "400 mg",
         "frequency": "every 6 hours", "notes": None}
FINDINGS = [
    "HIGH interaction with warfarin: NSAIDs raise the risk of major or fatal bleeding, including gastrointestinal "
    "bleeding; monitor the INR closely",
    "MODERATE the drug data says: NSAIDs may cause an increased risk of serious cardiovascular thrombotic events",
    "MODERATE renal: eGFR 42 mL/min; reduce the dose or avoid",
    "LOW duplicate: naproxen is an NSAID already on the chart",
]


def context(override: bool) -> ApprovalContext:
    return ApprovalContext("Robert Chen, born 1953-02-11, 72, male", "recorded",
                           ["Penicillin (anaphylaxis; severe)", "Sulfa (rash; mild)"], "Dr Rao",
                           findings=FINDINGS, not_checked=["the dose against the charted weight"] if override else [],
                           needs_override=override, password_needed=override)


def on_screen(app, widget) -> bool:
    region, screen = widget.region, app.screen.region
    return (widget.display and region.height > 0 and region.width > 0
            and screen.contains_region(region) and widget.screen.find_widget(widget) is not None)


@pytest.mark.parametrize("override", [False, True], ids=["findings", "override"])
async def test_approve_and_reject_are_visible_at_80x24(tmp_path, override):
    app, _, _ = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        screen = ApprovalScreen("prescribe_medication", dict(ORDER), context(override))
        app.push_screen(screen)
        await wait_until(pilot, lambda: app.screen is screen, what="the dialog")
        await pilot.pause()
        for button in ("#approve", "#reject"):
            widget = screen.query_one(button)
            assert on_screen(app, widget), f"{button} at {widget.region} is off the 80x24 screen"
            visible = screen.query_one("#approval-dialog").region
            assert visible.contains_region(widget.region), f"{button} outside the dialog's visible region"
        if override:
            screen.query_one("#approval-body").scroll_home(animate=False)
            await pilot.pause()
            await pilot.press("ctrl+y")  # no reason, no password: refused, and the reason is in view
            await pilot.pause()
            error = screen.query_one("#approval-error")
            assert "Not approved" in str(error.render()) and on_screen(app, error)
            assert screen.query_one("#approval-dialog").region.contains_region(error.region)
            password = screen.query_one("#approval-password")  # the override still asks for the password
            password.focus()
            await pilot.pause()
            assert on_screen(app, password), "the password field cannot be scrolled into view"
            assert not password.region.overlaps(screen.query_one("#approval-buttons").region)
            await pilot.click("#reject")
            await wait_until(pilot, lambda: app.screen is not screen, what="the dialog to close on Reject")
