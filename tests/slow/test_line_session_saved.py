"""The line session's saved conversation and lock, driven through standard input with a
scripted model and the real servers: every exchange is saved in the terminal's sessions store,
`--resume` shows it again with its patient confirmed and its exchanges as context, `/lock` takes
the signed-in clinician's password only and warns before the account locks, end of input at the
lock signs out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.accounts.sessions import SessionStore

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
DIRECT = {"intent": "DIRECT", "task_summary": "General question.", "suggested_tool": None}
PASSWORD = "correct horse battery staple"


def run(home: Path, *args: str, lines: list[str], script: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "APPLIANCE_HOME": str(home), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    extra: list[str] = []
    if script is not None:
        path = home / f"script-{len(list(home.glob('script-*')))}.json"
        path.write_text(json.dumps(script))
        extra = ["--script", str(path)]
    return subprocess.run([sys.executable, "-m", "tui.launcher", *args, *extra], input="\n".join(lines) + "\n",
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=150)


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    assert run(home, "init", "--no-model", lines=[]).returncode == 0
    return home


def test_a_line_session_is_saved_and_resumed_with_its_patient_and_context(home):
    first = run(home, "session", "--patient", "abc-123", lines=["What is hypertension?", "/quit"],
                script={"INTENT_CLASSIFY": [DIRECT], "SYNTHESIZE": ["Hypertension is raised arterial pressure."]})
    assert first.returncode == 0, first.stderr
    store = SessionStore(home / "sessions.sqlite")
    saved = store.latest_session()
    assert saved is not None and saved.patient_id == "abc-123"
    assert store.history(saved.id) == [("user", "What is hypertension?"),
                                       ("assistant", "Hypertension is raised arterial pressure.")]

    again = run(home, "session", "--resume", lines=["And its treatment?", "/quit"],
                script={"INTENT_CLASSIFY": [DIRECT], "SYNTHESIZE": ["Lifestyle change, then medicines."]})
    assert again.returncode == 0, again.stderr
    out = again.stdout
    assert "Resumed: What is hypertension?" in out
    assert "You: What is hypertension?\n  Assistant: Hypertension is raised arterial pressure." in out
    assert "Current patient: abc-123 (John Smith)." in out and "Allergies:" in out  # confirmed again
    assert store.history(saved.id)[-2:] == [("user", "And its treatment?"),
                                            ("assistant", "Lifestyle change, then medicines.")]
    assert len(store.list_sessions()) == 1  # the same session, not a new one

    unknown = run(home, "session", "--session", "no-such-session", lines=[])
    assert unknown.returncode == 2 and unknown.stderr.strip() == \
        "appliance session: cannot reopen session no-such-session: that session no longer exists"


def test_lock_takes_the_clinicians_password_only_and_warns_before_the_lock(home):
    added = run(home, "user", "add", "aokafor", "--display-name", "Dr. Ada Okafor", lines=[PASSWORD])
    assert added.returncode == 0, added.stderr
    done = run(home, "session", lines=["aokafor", PASSWORD, "/lock", "not it", PASSWORD, "Hello", "/lock"],
               script={"INTENT_CLASSIFY": [DIRECT], "SYNTHESIZE": ["Hello."]})
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "Signed in as Dr. Ada Okafor (aokafor)" in out
    assert "Locked (Dr. Ada Okafor (aokafor))." in out
    assert "Wrong password: 4 tries left before the account locks for 15 minutes." in out
    assert "Unlocked: Dr. Ada Okafor (aokafor)." in out and "Hello." in out
    assert out.rstrip().endswith("Signed out: the session has ended.")  # end of input at the second lock


def test_a_wrong_password_at_sign_in_states_the_lock_policy(home):
    run(home, "user", "add", "aokafor", lines=[PASSWORD])
    done = run(home, "session", lines=["aokafor", "not it"])
    assert done.returncode != 0
    assert "Unknown clinician or wrong password. After 5 wrong passwords in a row an account locks for 15 minutes." \
        in done.stdout + done.stderr


def test_opening_another_patient_starts_a_new_saved_conversation(home):
    script = {"INTENT_CLASSIFY": [DIRECT, DIRECT], "SYNTHESIZE": ["Answer one.", "Answer two."]}
    done = run(home, "session", "--patient", "abc-123",
               lines=["What is hypertension?", "/patient pat-006", "What is asthma?", "/quit"], script=script)
    assert done.returncode == 0, done.stderr
    assert "A new conversation starts for pat-006 (Emily Johnson); the previous one is saved" in done.stdout
    store = SessionStore(home / "sessions.sqlite")
    sessions = {s.patient_id: store.history(s.id) for s in store.list_sessions()}
    assert sessions == {"abc-123": [("user", "What is hypertension?"), ("assistant", "Answer one.")],
                        "pat-006": [("user", "What is asthma?"), ("assistant", "Answer two.")]}
