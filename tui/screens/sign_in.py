"""Clinician sign-in, before the main screen, and the lock screen the terminal shows after a
spell without input (or F12).

Invariants:
- A full screen, not a dialog: nothing of the conversation or the chart shows behind it.
- It returns only an ``Account`` the store verified (name and password; the store applies the
  lock-out); nothing else dismisses it, so there is no way past it without a password.
- Locked, it asks for the signed-in clinician's password only. Signing out (F2) instead posts
  ``SignedOut``: the app ends that clinician's turn, conversation, patient and tool box at
  once, closes this screen and any dialog beneath it, and shows a plain sign-in for anyone.
- The password check (Argon2, a tenth of a second or so) runs in a thread worker that only
  posts ``Checked``; the password field is emptied as soon as it is read.
- A wrong password warns before the lock: the sign-in screen states the policy (it cannot say
  more without telling which names exist); the lock screen, whose name is fixed, says
  "Wrong password" and how many tries are left.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Static

from appliance.accounts import Account
from common.errors import ApplianceError


class SignInScreen(Screen[Account]):
    BINDINGS = [Binding("f2", "sign_out", "Sign out", show=True)]

    class Checked(Message):
        """The store's answer: the account, or why not (one line for the clinician)."""

        def __init__(self, account: Account | None, problem: str | None = None) -> None:
            super().__init__()
            self.account = account
            self.problem = problem

    class SignedOut(Message):
        """The locked clinician was signed out from the lock screen."""

        def __init__(self, account: Account) -> None:
            super().__init__()
            self.account = account

    def __init__(self, verify: Callable[[str, str], Account], locked: Account | None = None,
                 cursor_blink: bool = True, note: str | None = None,
                 explain: Callable[[ApplianceError], str] = str) -> None:
        super().__init__()
        self._verify = verify  # runs in the worker; raises SignInRefused (or another ApplianceError)
        self._explain = explain  # a refusal in the clinician's words (runs in the worker: may read the store)
        self.locked = locked  # whose session is locked; None: anyone may sign in
        self._cursor_blink = cursor_blink
        self._note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="sign-in-dialog"):
            yield Static("", id="sign-in-intro", markup=False)
            name = Input(placeholder="account name", id="sign-in-name", compact=True)
            password = Input(placeholder="password", password=True, id="sign-in-password", compact=True)
            for field in (name, password):
                field.cursor_blink = self._cursor_blink
            with Horizontal(classes="sign-in-field"):
                yield Static("clinician", classes="sign-in-label")
                yield name
            with Horizontal(classes="sign-in-field"):
                yield Static("password", classes="sign-in-label")
                yield password
            yield Static("", id="sign-in-error", markup=False)
            with Horizontal(id="sign-in-buttons"):
                yield Button("Sign in", id="sign-in", variant="primary", compact=True)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self._show_mode()

    def _show_mode(self) -> None:
        dialog = self.query_one("#sign-in-dialog")
        name = self.query_one("#sign-in-name", Input)
        intro = self.query_one("#sign-in-intro", Static)
        if self.locked is not None:
            dialog.border_title = "Locked"
            intro.update(f"The terminal is locked. Signed in: {self.locked.label}.\n"
                         "Type your password to continue, or press F2 to sign out so another "
                         "clinician can sign in (that ends this conversation and closes the patient).")
            name.value = self.locked.name
            name.disabled = True
            self.query_one("#sign-in", Button).label = "Unlock"
            self.query_one("#sign-in-password", Input).focus()
        else:
            dialog.border_title = "Sign in"
            intro.update(self._note or "Offline clinical assistant. Sign in with your clinician account: "
                         "what you approve is recorded in your name.")
            name.disabled = False
            self.query_one("#sign-in", Button).label = "Sign in"
            name.focus()
        self.refresh_bindings()

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "sign_out":
            return self.locked is not None
        return True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "sign-in-name":
            self.query_one("#sign-in-password", Input).focus()
        else:
            self.attempt()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.attempt()

    def attempt(self) -> None:
        name_field = self.query_one("#sign-in-name", Input)
        password_field = self.query_one("#sign-in-password", Input)
        name, password = name_field.value.strip(), password_field.value
        password_field.value = ""
        if not name:
            self._problem("Type your account name.")
            name_field.focus()
            return
        if not password:
            self._problem("Type your password.")
            password_field.focus()
            return
        self.query_one("#sign-in-error", Static).update("Checking…")
        self.query_one("#sign-in-buttons").disabled = True
        password_field.disabled = True
        self._check(name, password)

    @work(thread=True, exclusive=True, group="sign-in", exit_on_error=False)
    def _check(self, name: str, password: str) -> None:
        try:
            account = self._verify(name, password)
        except ApplianceError as exc:  # refused, locked, disabled, or the accounts file failed
            self.post_message(self.Checked(None, self._explain(exc)))
        except Exception as exc:  # noqa: BLE001 - a third-party failure is a message, never a crash
            self.post_message(self.Checked(None, f"Signing in failed ({type(exc).__name__})."))
        else:
            self.post_message(self.Checked(account))

    def on_sign_in_screen_checked(self, message: Checked) -> None:
        self.query_one("#sign-in-buttons").disabled = False
        password_field = self.query_one("#sign-in-password", Input)
        password_field.disabled = False
        account = message.account
        if account is not None and (self.locked is None or account.name == self.locked.name):
            self.dismiss(account)
            return
        self._problem(message.problem or "Sign-in refused.")
        password_field.focus()

    def _problem(self, text: str) -> None:
        self.query_one("#sign-in-error", Static).update(text)
        self.app.bell()

    def action_sign_out(self) -> None:
        if self.locked is not None:  # the app closes this screen and whatever lay beneath it
            self.post_message(self.SignedOut(self.locked))
