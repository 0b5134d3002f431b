"""The approval dialog under the one safety policy (``appliance.safety.policy``): approving a
prescription whose report needs an override keeps the dialog open until a reason of real words
and the password are there, and then returns both (Pilot)."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Static

from tests.tui.helpers import make_app, ready, wait_until
from tui.approval import ApprovalContext
from tui.screens.approval import ApprovalScreen

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
ORDER = {"patient_id": "pat-006", "medication_name": "amoxicillin", "dosage": "500 mg",
         "frequency": "three times daily", "notes": None}


def context(password_needed: bool = True) -> ApprovalContext:
    return ApprovalContext("Emily Johnson", "recorded", ["Penicillin (anaphylaxis; severe)"], "Dr Rao",
                           findings=["HIGH allergy: Penicillin allergy recorded"], needs_override=True,
                           password_needed=password_needed)


async def test_an_override_needs_a_reason_of_real_words_and_the_password(tmp_path):
    app, _, _ = make_app(tmp_path)
    answers = []
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        screen = ApprovalScreen("prescribe_medication", dict(ORDER), context())
        app.push_screen(screen, callback=answers.append)
        await wait_until(pilot, lambda: app.screen is screen and bool(screen.query("#approval-buttons")), what="the dialog")
        error = screen.query_one("#approval-error", Static)
        for reason, password in ((None, "secret words"), ("   x  ", "secret words"), ("desensitised last year", None)):
            screen.query_one("#approval-reason", Input).value = reason or ""
            screen.query_one("#approval-password", Input).value = password or ""
            screen.action_approve()
            await pilot.pause()
            assert app.screen is screen and not answers, (reason, password)
            assert "Not approved" in str(error.render())
        screen.query_one("#approval-reason", Input).value = "desensitised by the allergy service"
        screen.query_one("#approval-password", Input).value = "secret words"
        screen.action_approve()
        await wait_until(pilot, lambda: bool(answers), what="the approval")
    (approval,) = answers
    assert approval.approved and approval.reason == "desensitised by the allergy service"
    assert approval.password == "secret words" and "secret words" not in repr(approval)


async def test_without_accounts_an_override_asks_no_password(tmp_path):
    app, _, _ = make_app(tmp_path)
    answers = []
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        screen = ApprovalScreen("prescribe_medication", dict(ORDER), context(password_needed=False))
        app.push_screen(screen, callback=answers.append)
        await wait_until(pilot, lambda: app.screen is screen and bool(screen.query("#approval-buttons")), what="the dialog")
        assert not screen.query("#approval-password")
        screen.query_one("#approval-reason", Input).value = "desensitised by the allergy service"
        screen.action_approve()
        await wait_until(pilot, lambda: bool(answers), what="the approval")
    assert answers[0].approved and answers[0].password is None
