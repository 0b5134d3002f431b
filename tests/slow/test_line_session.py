"""The line session (`appliance session`) as a script drives it: scripted model, real MCP
servers over stdio, real standard input and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


def session(tmp_path: Path, script: dict, lines: list[str], *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path / "home"), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    subprocess.run([sys.executable, "-m", "tui.launcher", "init", "--no-model"], env=env, cwd=ROOT, check=True,
                   capture_output=True, timeout=120)
    return subprocess.run([sys.executable, "-m", "tui.launcher", "session", "--script", str(path), *args],
                          input="\n".join(lines) + "\n", env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_the_demo_notice_and_the_chart_reminder_in_the_line_session(tmp_path):
    script = {
        "INTENT_CLASSIFY": [{"intent": "DIRECT", "task_summary": "General question.", "suggested_tool": None},
                            {"intent": "TOOL_NEEDED", "task_summary": "Chart review.", "suggested_tool": "get_patient_chart"}],
        "TOOL_SELECT": [{"tool_name": "get_patient_chart"}, {"patient_id": "abc-123"}],
        "RESULT_CLASSIFY": [{"quality": "success_rich", "brief_summary": "Chart returned."}],
        "SYNTHESIZE": ["Hypertension is persistently raised arterial pressure.",
                       "John Smith has type 2 diabetes and takes metformin."],
    }
    done = session(tmp_path, script, ["What is hypertension?", "Review the chart of abc-123", "/quit"])
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "*** DEMO MODEL: ANSWERS ARE NOT CLINICAL ADVICE ***" in out
    # the chart read is answered in code's words (the scripted model's second answer is never asked for)
    first, second = out.split("Hypertension is persistently raised arterial pressure.")[1].split(
        "From the chart of John Smith (born 1958-03-14, ID abc-123):")
    assert "[demo model: answers are not clinical advice]" in first and "verify it against the chart" not in first
    assert "- Metformin 500 mg twice daily" in second and "John Smith has type 2 diabetes" not in out
    assert "verify it against the chart" in second and "[demo model: answers are not clinical advice]" in second


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_an_order_reaches_the_approval_prompt_on_the_real_model(tmp_path):
    """A prescription typed in clinical words on the shipped model, in the line session: pat-006 made current, the order typed
    as a clinician types it; the prompt names that patient and the clinician's drug, dose and
    frequency, with the penicillin anaphylaxis first among the findings. Answered no: nothing
    is written, and the findings are printed again with the answer."""
    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path / "home"), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    subprocess.run([sys.executable, "-m", "tui.launcher", "init"], env=env, cwd=ROOT, check=True,
                   capture_output=True, timeout=300)
    lines = ["/patient pat-006", "Prescribe amoxicillin 500 mg three times daily", "n", "/quit"]
    done = subprocess.run([sys.executable, "-m", "tui.launcher", "session"], input="\n".join(lines) + "\n",
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=560)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Emily Johnson, born 1985-05-09" in out and "Allergies: Penicillin" in out  # /patient confirms
    proposal = out.split("The assistant proposes a change to the record: ", 1)[1]
    assert proposal.startswith("Prescribe amoxicillin 500 mg three times daily")
    assert "Patient: pat-006" in proposal
    findings = proposal.split("Medication safety check for", 1)[1]
    assert findings.split("\n")[1].startswith("- HIGH allergy: Penicillin allergy recorded")
    assert "NOT WRITTEN" in proposal
