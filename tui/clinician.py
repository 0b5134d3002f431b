"""The clinician at the terminal: sign-in, the idle lock, sign-out, and who writes.

A mixin of ``ClinicApp``; these handlers run on the UI thread and own ``clinician``,
``locked`` and the approval dialogs held while locked (``_held``). The password check runs in
the sign-in screen's worker (``tui.screens.sign_in``).

Invariants:
- When accounts exist nothing is written without a signed-in clinician: the tool box starts
  only after sign-in, with the clinician as its servers' ``APPLIANCE_USER`` (the author the
  EHR server records), and an approval asked for while no one is signed in is a rejection.
- While the sign-in or lock screen is up (``locked``) an approval dialog is held, not shown;
  the unlock shows it, a sign-out rejects it.
- The Author line of the approval dialog and ``Approval.clinician`` name the same person.
"""

from __future__ import annotations

import time

from textual.events import InputEvent, MouseMove
from textual.screen import Screen

from appliance.accounts import Account, AccountStore
from appliance.accounts.reauthenticate import reauthenticate
from appliance.accounts.sign_in import said
from common.operator import operator_name
from tui.screens.sign_in import SignInScreen


class ClinicianHandling:
    accounts: AccountStore
    accounts_required: bool
    clinician: Account | None
    locked: bool
    _held: list[tuple[Screen, object]]
    _last_input: float

    def reauthenticate(self, password: str | None) -> bool | None:
        """The signed-in clinician's password given again for an override (runs in the turn's
        thread; ``appliance.accounts.reauthenticate``)."""
        if not self.accounts_required:
            return None
        return reauthenticate(self.accounts, self.clinician.name if self.clinician else None, password)

    def author_name(self) -> str | None:
        """Who writes and decides: the signed-in clinician's account name; with no accounts the
        operator's; None when accounts exist and no one is signed in (nothing may be written)."""
        if self.clinician is not None:
            return self.clinician.name
        return None if self.accounts_required else operator_name()

    def author_label(self) -> str:
        """The approval dialog's Author line."""
        if self.clinician is not None:
            return self.clinician.label
        if self.accounts_required:
            return "nobody is signed in"
        return f"{operator_name()} (operator: no clinician accounts)"

    def tools_user(self) -> str | None:
        """The tool box's APPLIANCE_USER: the signed-in clinician (None: the operator's environment)."""
        return self.clinician.name if self.clinician is not None else None

    async def on_event(self, event) -> None:
        if isinstance(event, InputEvent) and not isinstance(event, MouseMove):
            self._last_input = time.monotonic()  # a key, click or scroll: the clinician is here
        await super().on_event(event)

    def _check_idle(self) -> None:
        idle = self.settings.idle_lock_minutes * 60
        if self.clinician is not None and not self.locked and time.monotonic() - self._last_input >= idle:
            self.action_lock()

    def _show_sign_in(self, note: str | None = None, locked: Account | None = None) -> None:
        """The sign-in screen over everything; ``locked``: the lock screen of that clinician."""
        self.locked = True
        screen = SignInScreen(self.accounts.verify, locked=locked, cursor_blink=self.cursor_blink, note=note,
                              explain=lambda exc: said(self.accounts, exc, locked.name if locked else None))
        self.push_screen(screen, callback=self._signed_in)

    def action_lock(self) -> None:
        if self.clinician is None or self.locked:
            if not self.accounts_required:
                self.notice("There are no clinician accounts on this appliance, so there is nothing to unlock with "
                            "(`appliance user add NAME` creates one).", "warning")
            return
        self._show_sign_in(locked=self.clinician)

    def _signed_in(self, account: Account | None) -> None:
        if account is None:  # the screen returns only a verified account
            return
        self.locked = False
        self._last_input = time.monotonic()
        first = self.clinician is None
        self.clinician = account
        self.main.status.set_clinician(account.display_name or account.name)
        if first:
            self._launch_tools()
            self.notice(f"Signed in as {account.label}.")
        held, self._held = self._held, []
        for screen, callback in held:
            self.push_screen(screen, callback=callback)

    def _present_approval(self, screen: Screen, callback) -> None:
        """The bridge's way to show an approval dialog: held beneath the lock until the unlock."""
        if self.locked and self.clinician is not None:
            self._held.append((screen, callback))
        elif self.author_name() is None:
            callback(None)  # no one signed in: a rejection
        else:
            self.push_screen(screen, callback=callback)

    def on_sign_in_screen_signed_out(self, message: SignInScreen.SignedOut) -> None:
        """F2 on the lock screen: everything of that clinician's ends now, then anyone may sign in."""
        self.clinician = None
        self.bridge.reject_pending()  # an approval dialog beneath the lock is closed below
        held, self._held = self._held, []
        for _screen, callback in held:
            callback(None)
        if self.turn is not None:  # an open approval dialog is rejected by the cancel
            self.turn.cancel.set()
            self._finish_cancelled(self.turn)
        with self.batch_update():
            while len(self.screen_stack) > 1:  # the lock screen and any dialog beneath it
                self.pop_screen()
            self.conversation.start_new()
            self._clear_chat()
            self.open_patient(None)
            self.image_path = None
            self.main.attachment.clear()
            self._stop_tools()
            self.main.status.set_clinician("")
            self._show_sign_in(note=f"{message.account.label} signed out. Sign in with your clinician account.")
