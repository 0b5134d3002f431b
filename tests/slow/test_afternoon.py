"""A clinician's afternoon replayed on the shipped model, in the terminal and in the line session:
sign in, open a patient by name, ask, prescribe with approval, switch patient,
prescreen, cancel an answer, lock and unlock, quit, and resume. Real model, real MCP servers over
stdio, the demo record; the terminal through Textual's Pilot, the line session in a pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import sqlite3
import struct
import subprocess
import sys
import termios
import time

import pytest
from textual.widgets import OptionList

from appliance.accounts import AccountStore
from appliance.config import Settings
from common import locations
from tests.slow.test_tui_pty import ROOT, Terminal, _env
from tests.tui.helpers import ask, settle, texts, wait_until
from tests.tui.test_tui_sign_in import sign_in, type_password
from tui.app import ClinicApp
from tui.screens.approval import ApprovalScreen
from tui.screens.patient_search import PatientSearchScreen
from tui.screens.sign_in import SignInScreen

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(1800)]
PASSWORD = "correct horse battery staple"
ORDER = "Prescribe acetaminophen 500 mg every 6 hours as needed"


class ControllingTerminal(Terminal):
    """A pseudo-terminal that is the child's controlling terminal, as a clinician's is: Ctrl+C
    typed there is a SIGINT to the session (the MCP servers lead their own sessions)."""

    def __init__(self, argv: list[str], env: dict[str, str], cols: int = 120, rows: int = 40):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

        def own_terminal() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
                                     preexec_fn=own_terminal)
        os.close(slave)
        self.raw = b""


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def home(appliance_home):
    from appliance.setup.home import init_home

    init_home(progress=lambda message: None, with_model=False)  # the model is the checkout's
    AccountStore.from_settings(Settings()).add("aokafor", PASSWORD, display_name="Dr. Ada Okafor")
    return appliance_home


def active_medications(patient_id: str) -> list[str]:
    conn = sqlite3.connect(locations.ehr_db_path())
    try:
        return [r[0].lower() for r in conn.execute(
            "SELECT medication_name FROM medication_requests WHERE patient_id = ? AND status = 'active'", [patient_id])]
    finally:
        conn.close()


async def open_by_name(pilot, name: str) -> None:
    app = pilot.app
    await pilot.press("ctrl+o")
    await wait_until(pilot, lambda: isinstance(app.screen, PatientSearchScreen), what="the search dialog")
    await pilot.press(*name, "enter")
    options = app.screen.query_one(OptionList)
    await wait_until(pilot, lambda: options.option_count >= 1, timeout=30, what=f"matches for {name}")
    await pilot.press("enter")
    await wait_until(pilot, lambda: app.screen is app.main, what="the dialog to close")


@pytest.mark.anyio
async def test_an_afternoon_in_the_terminal(home):
    def clinic(**kw) -> ClinicApp:
        return ClinicApp(Settings(n_threads=2), sessions_path=home / "sessions.sqlite", cursor_blink=False,
                         health_interval=0, **kw)

    app = clinic()
    async with app.run_test(size=(100, 30)) as pilot:
        await sign_in(pilot, password=PASSWORD)
        await wait_until(pilot, lambda: app.agent is not None or app.model_error, timeout=180, what="start-up")
        assert app.agent is not None, app.model_error
        # open a patient by name: her allergies lead the banner
        await open_by_name(pilot, "Emily Johnson")
        await wait_until(pilot, lambda: app.chart is not None, timeout=30, what="her chart")
        assert app.conversation.patient_id == "pat-006" and "Penicillin" in str(app.main.banner.render())
        # ask: a chart question is answered from the chart
        await ask(pilot, "What allergies does she have?")
        await wait_until(pilot, lambda: app.turn is None, timeout=300, what="the answer")
        assert "enicillin" in texts(app)[-1]
        # prescribe, approved in the dialog: written to her chart
        await ask(pilot, ORDER)
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), timeout=300, what="the approval")
        assert app.screen.original["patient_id"] == "pat-006"
        await pilot.press("ctrl+y")
        await wait_until(pilot, lambda: app.turn is None, timeout=300, what="the written answer")
        assert "acetaminophen" in active_medications("pat-006")
        # switch patient: a new conversation
        await open_by_name(pilot, "John Smith")
        await settle(pilot)
        assert app.conversation.patient_id == "abc-123" and texts(app) == []
        # prescreen (F6): verdicts in the conversation
        await pilot.press("f6")
        await wait_until(pilot, lambda: app.turn is not None, what="the prescreen to start")
        await wait_until(pilot, lambda: app.turn is None, timeout=900, what="the prescreen")
        assert "trial" in texts(app)[-1].lower(), texts(app)[-1][:400]
        # cancel an answer with Escape
        await ask(pilot, "Explain the long-term management of hypertension in detail")
        await wait_until(pilot, lambda: app.turn is not None and app.turn.started, what="the answer to start")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.turn is None, timeout=120, what="the cancel")
        assert app.main.chat.messages()[-1].has_class("cancelled")
        # lock (F12) and unlock with the same password
        await pilot.press("f12")
        await wait_until(pilot, lambda: isinstance(app.screen, SignInScreen), what="the lock")
        await type_password(pilot, PASSWORD)
        await wait_until(pilot, lambda: app.screen is app.main, what="the unlock")
        conversation = texts(app)
        await pilot.press("ctrl+q")
    # resume: the same conversation, the same patient
    again = clinic(resume="latest")
    async with again.run_test(size=(100, 30)) as pilot:
        await sign_in(pilot, password=PASSWORD)
        await wait_until(pilot, lambda: texts(again)[:1] == conversation[:1], timeout=60, what="the resumed session")
        assert again.conversation.patient_id == "abc-123"
        await pilot.press("ctrl+q")


def test_an_afternoon_in_the_line_session(home):
    env = _env(home)

    def session(*args: str) -> Terminal:
        term = ControllingTerminal([sys.executable, "-m", "tui.launcher", "session", *args], env)
        term.read_until("Clinician: ", timeout=60)
        term.send("aokafor\r")
        term.read_until("Password: ", timeout=30)
        term.send(PASSWORD + "\r")
        return term

    def after(term: Terminal, mark: int, pattern: str, timeout: float) -> str:
        """The output after ``mark`` once ``pattern`` shows there."""
        deadline = time.monotonic() + timeout
        while pattern not in term.screen_text()[mark:]:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or term.proc.poll() is not None:
                raise AssertionError(f"{pattern!r} never came:\n{term.screen_text()[mark:][-1500:]}")
            ready, _, _ = select.select([term.master], [], [], min(remaining, 0.5))
            if ready:
                try:
                    term.raw += os.read(term.master, 65536)
                except OSError:
                    break
        return term.screen_text()[mark:]

    def prompt_after(term: Terminal, mark: int, timeout: float) -> str:
        return after(term, mark, "] > ", timeout)

    def say(term: Terminal, line: str, timeout: float = 300) -> str:
        mark = len(term.screen_text())
        term.send(line + "\r")
        time.sleep(0.2)
        return prompt_after(term, mark + len(line), timeout)

    term = session()
    try:
        prompt_after(term, 0, 180)
        found = say(term, "/find Emily Johnson")
        assert "Current patient: pat-006 (Emily Johnson)" in found and "Allergies: Penicillin" in found
        assert "enicillin" in say(term, "What allergies does she have?")
        mark = len(term.screen_text())
        term.send(ORDER + "\r")
        assert "Patient: pat-006" in after(term, mark, "Approve this write? [y/N]", 300)
        written = say(term, "y")
        assert "acetaminophen" in active_medications("pat-006"), written
        assert "Current patient: abc-123 (John Smith)" in say(term, "/patient abc-123")
        assert "trial" in say(term, "/prescreen", timeout=900).lower()
        mark = len(term.screen_text())
        term.send("Explain the long-term management of hypertension in detail\r")
        time.sleep(3)
        term.send("\x03")  # Ctrl+C stops this answer, the session goes on
        assert "[answer stopped" in prompt_after(term, mark, 120)
        mark = len(term.screen_text())
        term.send("/lock\r")
        after(term, mark, "Password for aokafor", 30)
        term.send(PASSWORD + "\r")
        assert "Unlocked: Dr. Ada Okafor (aokafor)." in prompt_after(term, mark, 30)
        term.send("/quit\r")
        assert term.drain_until_exit(timeout=30) == 0
    finally:
        term.close()
    term = session("--resume")
    try:
        resumed = prompt_after(term, 0, 180)
        # the latest conversation is John Smith's (opening him started it): the prescreen and the stopped answer
        assert "Resumed: /prescreen" in resumed and "You: Explain the long-term management" in resumed
        assert "What allergies does she have?" not in resumed
        assert "Current patient: abc-123 (John Smith)." in resumed
        term.send("/quit\r")
        assert term.drain_until_exit(timeout=30) == 0
    finally:
        term.close()
