"""Clinician sign-in in the clinic terminal (Pilot): the sign-in screen before anything else,
wrong passwords and the lock-out, the signed-in clinician in the status line, the approval
dialog and the approval's result, the tool box started in the clinician's name, the idle lock,
an approval held beneath the lock, sign-out, and the no-account mode."""

from __future__ import annotations

import threading

import pytest
from argon2 import PasswordHasher
from textual.command import CommandPalette
from textual.widgets import Input, Static

from appliance.accounts import AccountStore
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.scripted import ScriptedToolBox
from tests.tui.helpers import (
    DRUGS,
    SIZE,
    SY,
    WRITE_ARGS,
    ask,
    chart,
    intent,
    ready,
    settle,
    texts,
    wait_until,
)
from tui.app import ClinicApp
from tui.screens.approval import ApprovalScreen
from tui.screens.sign_in import SignInScreen

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
PASSWORD = "correct horse battery"
ALLERGY = WRITE_ARGS["add_allergy"]


class Tools(ScriptedToolBox):
    def __init__(self, user):
        super().__init__({"get_patient_chart": [{"result": chart()}] * 4}, fallback=None, drug_names=DRUGS)
        self.user = user
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def store(tmp_path):
    store = AccountStore(tmp_path / "accounts.sqlite", max_failures=3, hasher=CHEAP)
    store.add("aokafor", PASSWORD, display_name="Dr. Ada Okafor")
    store.add("bsmith", "another password")
    return store


def clinic(tmp_path, store, script: dict | None = None, **settings):
    """The terminal over ``store``; ``app.made`` lists the tool boxes made, each with its user."""
    model = ScriptedModel(script or {})
    made: list[Tools] = []

    def tools_factory(user=None):
        made.append(Tools(user))
        return made[-1]

    app = ClinicApp(Settings(**settings), model_loader=lambda s, progress: model, tools_factory=tools_factory,
                    sessions_path=tmp_path / "sessions.sqlite", cursor_blink=False, health_interval=0,
                    accounts=store)
    app.made = made
    return app


def problem(app) -> str:
    return str(app.screen.query_one("#sign-in-error", Static).render())


async def type_password(pilot, password: str) -> None:
    field = pilot.app.screen.query_one("#sign-in-password", Input)
    await wait_until(pilot, lambda: not field.disabled, what="the password field")
    field.focus()
    field.value = password
    await pilot.press("enter")


async def sign_in(pilot, name: str = "aokafor", password: str = PASSWORD) -> None:
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, SignInScreen), what="the sign-in screen")
    pilot.app.screen.query_one("#sign-in-name", Input).focus()
    await pilot.press(*name, "enter")
    await type_password(pilot, password)


async def refused(pilot, words: str) -> None:
    await wait_until(pilot, lambda: words in problem(pilot.app), what=words)
    assert isinstance(pilot.app.screen, SignInScreen)


def approve_in_thread(app, tool: str = "add_allergy", args: dict = ALLERGY) -> list:
    """Ask the terminal's approver from a worker-like thread, as a turn does; the answer lands in the list."""
    answer: list = []
    threading.Thread(target=lambda: answer.append(app.bridge(tool, dict(args))), daemon=True).start()
    return answer


async def test_sign_in_covers_the_terminal_until_the_password_is_right(tmp_path, store):
    app = clinic(tmp_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, SignInScreen), what="the sign-in screen")
        assert app.screen.query_one("#sign-in-name", Input).has_focus
        await pilot.press("ctrl+o", "ctrl+p", "f12")  # nothing behind the screen answers
        await pilot.pause()
        assert isinstance(app.screen, SignInScreen) and not isinstance(app.screen, CommandPalette)
        assert app.made == [] and app.tools is None  # no tool box before someone signs in
        await pilot.press("tab")  # moving between the fields still works
        assert app.screen.query_one("#sign-in-password", Input).has_focus

        await sign_in(pilot, password="wrong password")
        await refused(pilot, "Unknown clinician or wrong password.")
        assert app.screen.query_one("#sign-in-password", Input).value == ""
        await sign_in(pilot, name="nobody")
        await refused(pilot, "Unknown clinician or wrong password.")

        await sign_in(pilot)
        await ready(pilot)
        assert app.screen is app.main and app.clinician.name == "aokafor"
        assert [t.user for t in app.made] == ["aokafor"]  # the servers' APPLIANCE_USER: the EHR's author
        assert str(app.main.status.query_one("#status-clinician", Static).render()) == "Dr. Ada Okafor"
        assert ("information", "Signed in as Dr. Ada Okafor (aokafor).") in app.notices
        assert app.author_name() == "aokafor"


async def test_the_lock_out_holds_even_for_the_right_password(tmp_path, store):
    app = clinic(tmp_path, store)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(2):  # each refusal warns of the lock before it comes
            await sign_in(pilot, password="wrong password")
            await refused(pilot, "Unknown clinician or wrong password. After 3 wrong passwords in a row an "
                                 "account locks for 15 minutes.")
        await sign_in(pilot, password="wrong password")
        await refused(pilot, "locked after 3 wrong passwords; try again in 15 minutes")
        await sign_in(pilot)
        await refused(pilot, "The account aokafor is locked")
        assert app.clinician is None and app.made == []


async def test_the_approval_names_the_signed_in_clinician_and_carries_the_decision(tmp_path, store):
    app = clinic(tmp_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await sign_in(pilot)
        await ready(pilot)
        answer = approve_in_thread(app)
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        block = str(app.screen.query_one("#approval-patient").render())
        assert "Author: Dr. Ada Okafor (aokafor)" in block
        await pilot.press("ctrl+y")
        await wait_until(pilot, lambda: answer, what="the decision")
        assert answer[0].approved and answer[0].clinician == "aokafor"

        answer = approve_in_thread(app)
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the second dialog")
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: answer, what="the rejection")
        assert not answer[0].approved and answer[0].clinician == "aokafor"


async def test_idle_lock_needs_the_same_clinicians_password(tmp_path, store):
    app = clinic(tmp_path, store, {"INTENT_CLASSIFY": [intent()], SY: ["Hello."]}, idle_lock_minutes=0.3 / 60)
    minutes = app.settings.idle_lock_minutes  # the idle check runs every 75 ms from here on
    async with app.run_test(size=SIZE) as pilot:
        app.settings = app.settings.model_copy(update={"idle_lock_minutes": 60.0})  # not while signing in
        await sign_in(pilot)
        await ready(pilot)
        await ask(pilot, "Hello")
        await wait_until(pilot, lambda: app.turn is None, what="the answer")
        assert app.screen is app.main
        before = app._last_input
        await pilot.press("space", "backspace")  # a key counts as the clinician being there
        assert app._last_input > before
        app.settings = app.settings.model_copy(update={"idle_lock_minutes": minutes})
        await wait_until(pilot, lambda: isinstance(app.screen, SignInScreen), what="the idle lock")
        screen = app.screen
        await wait_until(pilot, lambda: bool(screen.query("#sign-in-password"))
                         and screen.query_one("#sign-in-password").has_focus, what="the lock's password field")
        assert screen.locked.name == "aokafor" and app.locked
        name = screen.query_one("#sign-in-name", Input)
        assert name.disabled and name.value == "aokafor"
        assert screen.query_one("#sign-in-password", Input).has_focus
        await pilot.press("ctrl+n")  # the main screen's keys do nothing while locked
        app.notice("Opened John Smith")  # nothing shows over the lock (recorded only)
        await type_password(pilot, "another password")  # bsmith's: not this clinician's
        # the name is fixed here: no "unknown clinician", and the tries left before the lock
        await refused(pilot, "Wrong password: 2 tries left before the account locks for 15 minutes.")
        await type_password(pilot, "another password")
        await refused(pilot, "Wrong password: 1 try left before the account locks for 15 minutes.")
        app.settings = app.settings.model_copy(update={"idle_lock_minutes": 60.0})
        await type_password(pilot, PASSWORD)
        await wait_until(pilot, lambda: app.screen is app.main, what="the unlock")
        assert not app.locked and app.clinician.name == "aokafor"
        assert texts(app) == ["Hello", "Hello."]  # the conversation is where it was
        assert [t.user for t in app.made] == ["aokafor"]  # the same tool box
        assert ("information", "Opened John Smith") in app.notices
        assert not any("John Smith" in n.message for n in app._notifications)  # never shown as a toast


async def test_an_approval_waits_beneath_the_lock_until_the_unlock(tmp_path, store):
    app = clinic(tmp_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await sign_in(pilot)
        await ready(pilot)
        await pilot.press("f12")
        await wait_until(pilot, lambda: isinstance(app.screen, SignInScreen), what="the lock")
        answer = approve_in_thread(app)
        await wait_until(pilot, lambda: app._held, what="the dialog to be held")
        await settle(pilot)
        assert isinstance(app.screen, SignInScreen)
        assert not any(isinstance(s, ApprovalScreen) for s in app.screen_stack) and not answer
        await type_password(pilot, PASSWORD)
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the dialog after the unlock")
        await pilot.press("escape")
        await wait_until(pilot, lambda: answer, what="the rejection")
        assert not answer[0].approved and answer[0].clinician == "aokafor"


async def test_sign_out_ends_the_clinicians_context_and_the_next_one_gets_their_own(tmp_path, store):
    app = clinic(tmp_path, store, {"INTENT_CLASSIFY": [intent()], SY: ["Hello."]})
    async with app.run_test(size=SIZE) as pilot:
        await sign_in(pilot)
        await ready(pilot)
        app.open_patient("abc-123", "John Smith")
        await ask(pilot, "Hello")
        await wait_until(pilot, lambda: app.turn is None, what="the answer")
        answer = approve_in_thread(app)
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="an open approval dialog")
        await pilot.press("f12")
        await wait_until(pilot, lambda: isinstance(app.screen, SignInScreen), what="the lock")
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, SignInScreen) and app.screen.locked is None,
                         what="a plain sign-in screen")
        await settle(pilot)
        assert len(app.screen_stack) == 2  # the main screen and the sign-in: the old dialog is gone
        assert "Dr. Ada Okafor (aokafor) signed out." in str(app.screen.query_one("#sign-in-intro").render())
        assert app.clinician is None and app.tools is None and app.made[0].closed
        assert app.conversation.patient_id is None and texts(app) == [] and app.conversation.history == []
        await wait_until(pilot, lambda: answer, what="the open approval's rejection")
        assert not answer[0].approved

        await sign_in(pilot, name="bsmith", password="another password")
        await ready(pilot)
        assert app.clinician.name == "bsmith" and [t.user for t in app.made] == ["aokafor", "bsmith"]
        assert app.tools is app.made[1]
        assert str(app.main.status.query_one("#status-clinician", Static).render()) == "bsmith"


async def test_with_no_accounts_the_terminal_opens_in_the_operators_name(tmp_path, monkeypatch):
    monkeypatch.setenv("APPLIANCE_USER", "clinic-operator")
    app = clinic(tmp_path, AccountStore(tmp_path / "none.sqlite"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.screen is app.main and not app.accounts_required and app.clinician is None
        assert [t.user for t in app.made] == [None]  # the operator's environment, as before
        assert str(app.main.status.query_one("#status-clinician", Static).render()) == "no sign-in"
        assert app.author_name() == "clinic-operator"
        assert app.author_label() == "clinic-operator (operator: no clinician accounts)"
        await pilot.press("f12")  # no lock without accounts: the key does nothing
        await pilot.pause()
        assert app.screen is app.main and not app.locked
        app.action_lock()  # from the command palette: says why not
        assert app.screen is app.main and "nothing to unlock with" in app.notices[-1][1]
        answer = approve_in_thread(app)
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        await pilot.press("ctrl+y")
        await wait_until(pilot, lambda: answer, what="the decision")
        assert answer[0].clinician == "clinic-operator"
    assert not (tmp_path / "none.sqlite").exists()  # looking for accounts created no file
