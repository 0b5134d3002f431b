"""The agent's write approver for the terminal: called in the turn's worker thread, it shows
the approval dialog on the UI thread and blocks until the clinician decides.

Invariant: only an explicit Approve (with arguments that validate) lets a write run.
Escape, Reject, a dialog that cannot be shown, a cancelled turn and the app closing are all
rejections, so nothing is written unless the clinician said yes. Every decision carries the
signed-in clinician (``Approval.clinician``), and the app decides when the dialog may show
(``present``: not over the lock screen). Approving a prescription whose safety report needs an
override (a high finding, or anything not checked) is an override under the one safety policy
(``appliance.safety.policy``): the dialog asks for a reason of real words and the clinician's
password again; what the answer means (the override's reason, the password checked by
``reauthenticate``) is the conversation core's (``appliance.conversation.approval.answered``, the
line session's too), and the agent decides with ``decide`` as every door does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from textual.app import App

from appliance.conversation.approval import answered
from appliance.tools.base import Approval

log = logging.getLogger(__name__)
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ApprovalContext:
    """What the dialog shows beside the arguments: who the patient is, their allergies, who
    is writing, and the safety findings (None: no safety check ran for this write)."""

    patient: str  # identity line, or the id when the chart could not be read
    allergy_status: str  # recorded | none_known | not_recorded | unknown
    allergies: list[str]
    author: str
    findings: list[str] | None = field(default=None)
    not_checked: list[str] = field(default_factory=list)  # what the safety check could not check
    needs_override: bool = False  # approving is an override: a reason and the password again
    password_needed: bool = True  # False where the appliance has no clinician accounts
    not_open: bool = False  # written to a patient who is not the open one (the core's ``asked``)


class ApprovalBridge:
    def __init__(self, app: App, make_screen: Callable[..., object],
                 describe: Callable[[str, dict, dict | None], ApprovalContext | None] | None = None,
                 present: Callable[[object, Callable], None] | None = None,
                 clinician: Callable[[], str | None] | None = None,
                 reauthenticate: Callable[[str | None], bool | None] | None = None):
        self._app = app
        self._make_screen = make_screen
        self._describe = describe  # runs in the turn's thread (it may read the chart)
        # Shows the dialog on the UI thread (default: push it); the app holds it while locked.
        self._present = present or (lambda screen, callback: app.push_screen(screen, callback=callback))
        self._clinician = clinician or (lambda: None)  # who decides, stamped on every Approval
        # The password given again for an override: True right, False not, None no accounts.
        self._reauthenticate = reauthenticate or (lambda password: False)
        self._closed = threading.Event()
        self._round = 0  # bumped by reject_pending: requests asked before it are rejected
        self.cancel: threading.Event | None = None  # the running turn's cancel flag

    def close(self) -> None:
        """The app is closing: every pending and future request is rejected."""
        self._closed.set()

    def reject_pending(self) -> None:
        """The clinician signed out: every request waiting for a decision is rejected."""
        self._round += 1

    def _stopped(self, round_: int | None = None) -> bool:
        return (self._closed.is_set() or (self.cancel is not None and self.cancel.is_set())
                or (round_ is not None and round_ != self._round))

    def __call__(self, tool: str, args: dict, safety=None) -> Approval:
        clinician = self._clinician()  # who was signed in when the write was proposed
        given = self._ask(tool, args, safety)
        decision = answered(given.args, given.approved, safety, reason=given.reason, password=given.password,
                            reauthenticate=self._reauthenticate)
        return replace(decision, clinician=clinician)

    def _ask(self, tool: str, args: dict, safety=None) -> Approval:
        round_ = self._round
        if self._stopped():
            return Approval(False, args, "the turn was stopped before approval")
        decided = threading.Event()
        answer: list[Approval | None] = []

        def on_result(result: Approval | None) -> None:
            answer.append(result)
            decided.set()

        try:
            known_chart = getattr(safety, "chart", None)  # the chart the gate read, if it ran
            context = self._describe(tool, dict(args), known_chart) if self._describe else None
            if context is not None and safety is not None:  # the agent's gate ran: its findings
                context = replace(context, findings=safety.lines(), not_checked=[
                    f.text for f in safety.findings if f.kind in ("unknown_drug", "not_checked")],
                    needs_override=safety.needs_override, password_needed=self._reauthenticate(None) is not None)
        except Exception:  # noqa: BLE001 - the dialog still opens, saying what it could not read
            log.warning("the approval context could not be built", exc_info=True)
            context = None

        def show() -> None:
            self._present(self._make_screen(tool, dict(args), context), on_result)

        try:
            self._app.call_from_thread(show)
        except Exception:  # noqa: BLE001 - no dialog means no approval
            log.warning("the approval dialog could not be shown", exc_info=True)
            return Approval(False, args, "the approval dialog could not be shown")
        while not decided.wait(POLL_SECONDS):
            if self._stopped(round_):
                return Approval(False, args, "the turn was stopped before approval")
        result = answer[0] if answer else None
        if not isinstance(result, Approval):
            return Approval(False, args, "the clinician dismissed the approval")
        return result
