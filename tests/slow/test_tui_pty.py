"""The clinic terminal headless under a pseudo-terminal: `appliance tui` starts, shows the
prompt, answers one question (scripted model, real tool servers) and exits cleanly on Ctrl+Q."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b(?:\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|[@-Z\\-_])")
SCRIPT = {
    "INTENT_CLASSIFY": [{"intent": "DIRECT", "task_summary": "General question.", "suggested_tool": None}],
    "SYNTHESIZE": ["Hypertension means persistently raised arterial pressure."],
}


class Terminal:
    def __init__(self, argv: list[str], env: dict[str, str], cols: int = 80, rows: int = 24):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
                                     start_new_session=True)
        os.close(slave)
        self.raw = b""

    def screen_text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def read_until(self, pattern: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while pattern not in self.screen_text():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.proc.poll() is not None:
                tail = self.screen_text()[-1500:]
                raise AssertionError(f"{pattern!r} never appeared (exit {self.proc.poll()}):\n{tail}")
            ready, _, _ = select.select([self.master], [], [], min(remaining, 0.5))
            if ready:
                try:
                    self.raw += os.read(self.master, 65536)
                except OSError:  # the child closed the terminal
                    break

    def send(self, data: str) -> None:
        os.write(self.master, data.encode())

    def drain_until_exit(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.raw += os.read(self.master, 65536)
                except OSError:
                    break
        return self.proc.wait(max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        os.close(self.master)


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "APPLIANCE_HOME": str(home), "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24",
            "FASTMCP_CHECK_FOR_UPDATES": "off", "TEXTUAL_ANIMATIONS": "none"}


def _tui(*args: str) -> list[str]:
    return [sys.executable, "-m", "tui.launcher", "tui", *args]


def test_tui_under_a_pty_then_resumed(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    home = tmp_path / "home"
    term = Terminal(_tui("--script", str(script)), _env(home))
    try:
        term.read_until("Ask a question and press Enter", timeout=60)
        term.read_until("ready", timeout=60)
        term.send("What is hypertension?")
        term.send("\r")
        term.read_until("arterial", timeout=60)
        term.send("\x11")  # Ctrl+Q
        assert term.drain_until_exit(timeout=30) == 0
    finally:
        term.close()
    from appliance.accounts.sessions import SessionStore

    store = SessionStore(home / "sessions.sqlite")
    session = store.latest_session()
    assert session is not None and store.history(session.id)[-1][1].startswith("Hypertension means")

    # Both documented ways back into a saved session open it with its conversation.
    for args in (("--resume",), ("--session", session.id)):
        term = Terminal(_tui("--script", str(script), *args), _env(home))
        try:
            term.read_until("Resumed: What is hypertension?", timeout=60)
            term.read_until("arterial", timeout=30)
            term.send("\x11")
            assert term.drain_until_exit(timeout=30) == 0, args
        finally:
            term.close()


def test_unknown_session_is_one_line_and_non_zero(tmp_path):
    result = subprocess.run(_tui("--session", "no-such-session"), env=_env(tmp_path / "home"), cwd=ROOT,
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "appliance tui: cannot reopen session no-such-session: that session no longer exists"]
