"""``appliance selftest --json`` whole, as an operator runs it (a subprocess; its durability check
kills writer processes): it passes, measures every figure it claims, and never opens the data
home it was given."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from common.locations import PROJECT_ROOT

pytestmark = pytest.mark.timeout(300)


@pytest.mark.heavy
def test_the_selftest_command_passes_on_a_fresh_home(tmp_path):
    live = tmp_path / "live-home"
    live.mkdir()
    env = {**os.environ, "APPLIANCE_HOME": str(live), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    done = subprocess.run([sys.executable, "-m", "appliance.cli", "selftest", "--json"], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["writes_lost"] == 0 and out["partial_writes"] == 0 and out["uncaught_exceptions"] == 0
    assert out["durability"]["attempted"] >= 200 and out["durability"]["integrity"] == "ok"
    assert out["bad_inputs_tried"] >= 800
    assert out["safety_matrix"]["cases"] == 299 and out["safety_matrix"]["missed"] == 0
    # two rounds of: crashed mid-call, hung past the deadline, killed between calls
    assert out["faults_tried"] == out["faults_survived"] == 6, out["faults"]["details"]
    assert {d["error_type"] for d in out["faults"]["details"] if d["kind"] != "killed_between_calls"} <= {
        "service_unavailable", "timeout"}
    assert out["safety_matrix"]["false_clear"] == 0
    assert out["injection"]["failed"] == [] and out["audit"]["tamper_caught"]
    assert "Traceback" not in done.stderr
    assert list(live.iterdir()) == []
