"""The signed-in clinician is the author the real EHR records: ``ask --approve-writes`` with
``--clinician``, the line session's sign-in, and the clinic terminal's sign-in, each with a
scripted model and the real MCP servers over stdio on a fresh data home. The operator's own
name (``APPLIANCE_USER`` of this process) is set to someone else, so a write in the wrong
name would show."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.accounts import AccountStore
from appliance.cli import main
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.setup.home import init_home
from common import locations
from tests.tui.helpers import SIZE, ask, ready, wait_until
from tests.tui.test_tui_sign_in import sign_in
from tui.app import ClinicApp
from tui.screens.approval import ApprovalScreen

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery"
PATIENT = "abc-123"
QUESTION = f"Add a penicillin allergy with hives for {PATIENT}"
ARGS = {"patient_id": PATIENT, "substance": "penicillin", "reaction": "hives", "severity": None}
SCRIPT = {
    "INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "Record an allergy.",
                         "suggested_tool": "add_allergy"}],
    "TOOL_SELECT": [{"tool_name": "add_allergy"}, ARGS],
    "RESULT_CLASSIFY": [{"quality": "success_rich", "brief_summary": "Recorded."}],
    "SYNTHESIZE": ["The penicillin allergy is recorded."],
}


@pytest.fixture
def home(appliance_home, monkeypatch):
    init_home(progress=lambda message: None, with_model=False)
    AccountStore().add("aokafor", PASSWORD, display_name="Dr. Ada Okafor")
    monkeypatch.setenv("APPLIANCE_USER", "the-operator")
    return appliance_home


def written(home: Path) -> list[tuple[str, str | None]]:
    """(audit actor, allergy author) of every penicillin allergy written to abc-123."""
    conn = sqlite3.connect(home / "ehr.sqlite")
    try:
        actors = [r[0] for r in conn.execute("SELECT actor FROM audit_log WHERE tool = 'add_allergy'")]
        authors = [r[0] for r in conn.execute(
            "SELECT author FROM allergy_intolerances WHERE patient_id = ? AND substance = 'penicillin'", [PATIENT])]
    finally:
        conn.close()
    return list(zip(actors, authors, strict=True))


def test_ask_approve_writes_writes_in_the_clinicians_name(home, tmp_path, monkeypatch, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    argv = ["ask", QUESTION, "--script", str(script), "--approve-writes", "--clinician", "aokafor", "--json"]
    monkeypatch.setattr("sys.stdin", io.StringIO("wrong password\n"))
    assert main(argv) == 2
    assert written(home) == []  # refused: nothing written
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["tool"] for c in out["tool_calls"]] == ["add_allergy"] and out["tool_calls"][0]["error_type"] is None
    assert written(home) == [("aokafor", "aokafor")]


def run(home: Path, args: list[str], stdin: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "APPLIANCE_HOME": str(home), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    return subprocess.run([sys.executable, "-m", "tui.launcher", *args], input=stdin, env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=150)


def test_the_line_session_signs_in_and_writes_in_the_clinicians_name(home, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    refused = run(home, ["session", "--script", str(script)], f"aokafor\nwrong password\n{QUESTION}\ny\n/quit\n")
    assert refused.returncode == 2
    assert "the session needs a signed-in clinician: Unknown clinician or wrong password." in refused.stderr
    assert "Loading the model" not in refused.stdout and written(home) == []

    done = run(home, ["session", "--script", str(script)], f"AOKAFOR\n{PASSWORD}\n{QUESTION}\ny\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "Signed in as Dr. Ada Okafor (aokafor): your writes carry your name." in done.stdout
    assert "Author: aokafor\n" in done.stdout
    # code says the write in its own words; the scripted model's answer is never asked for
    assert "Recorded an allergy to penicillin (hives). The record was changed." in done.stdout
    assert "The penicillin allergy is recorded." not in done.stdout
    assert PASSWORD not in done.stdout + done.stderr
    assert written(home) == [("aokafor", "aokafor")]


def test_the_line_session_without_accounts_says_the_operator_writes(appliance_home, tmp_path, monkeypatch):
    init_home(progress=lambda message: None, with_model=False)
    monkeypatch.setenv("APPLIANCE_USER", "the-operator")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"INTENT_CLASSIFY": [{"intent": "DIRECT", "task_summary": "Greeting.",
                                                       "suggested_tool": None}], "SYNTHESIZE": ["Hello."]}))
    done = run(appliance_home, ["session", "--script", str(script)], "Hello\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "No clinician accounts on this appliance: writes are attributed to the operator, the-operator" in done.stdout


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_terminal_writes_in_the_signed_in_clinicians_name(home, tmp_path):
    model = ScriptedModel(SCRIPT)
    app = ClinicApp(Settings(), model_loader=lambda settings, progress: model,  # the real tool box (stdio)
                    sessions_path=tmp_path / "sessions.sqlite", cursor_blink=False, health_interval=0)
    async with app.run_test(size=SIZE) as pilot:
        await sign_in(pilot)
        await ready(pilot)
        await ask(pilot, QUESTION)
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.query("#approval-patient"),
                         timeout=60, what="the approval")
        assert "Author: Dr. Ada Okafor (aokafor)" in str(app.screen.query_one("#approval-patient").render())
        await pilot.press("ctrl+y")
        await wait_until(pilot, lambda: app.turn is None, timeout=60, what="the turn")
    assert written(home) == [("aokafor", "aokafor")]
    assert locations.ehr_db_path().parent == home
