"""``appliance model accept --limit 1`` on the shipped 270M model, as an operator runs it: a
subprocess on a fresh data home, every part of the run once (one case, one TrialGPT row, one
criterion, one CT.gov record). A quick check is never a verdict: not accepted, not recorded."""

from __future__ import annotations

import json

import pytest

from tests.slow.cli_run import run

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # a whole command on the real model: minutes


@pytest.mark.timeout(900)
def test_model_accept_quick_check_on_the_shipped_model(tmp_path):
    home = tmp_path / "home"
    proc = run(["model", "accept", "--limit", "1", "--json"], home, timeout=840)
    assert proc.returncode == 1, proc.stderr[-2000:]  # not accepted
    result = json.loads(proc.stdout)
    assert result["profile"] == "gemma3-270m"
    assert not result["verdict"]["accepted"] and not result["recorded"]
    assert result["verdict"]["reasons"][0].startswith("a partial run")
    intent = result["figures"]["nodes"]["nodes"]["intent"]
    assert intent["n"] == 1 and intent["valid"] == 1.0 and intent["median_seconds"] > 0
    jobs = result["figures"]["evaluations"]
    assert jobs["trialgpt"]["n"] == 1 and jobs["grounding"]["criteria"] == 1 and jobs["extraction"]["records"] == 1
    assert not (home / "acceptance").exists() or not list((home / "acceptance").glob("*.json"))
