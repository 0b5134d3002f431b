"""``appliance prescreen`` on the shipped small model and the real servers, on a demo patient.

The small model is a stand-in, not a clinical judge: this checks that every criterion gets a
valid constrained judgement whose citations are facts the chart holds, and that the verdicts
follow the rules, not that the judgements are right."""

from __future__ import annotations

import json

import pytest

from tests.slow.cli_run import run


@pytest.mark.heavy
@pytest.mark.timeout(660)
def test_prescreen_of_a_demo_patient_on_the_real_model(tmp_path):
    assert run(["init", "--no-model"], tmp_path, 300).returncode == 0
    proc = run(["prescreen", "abc-123", "--max-trials", "1", "--json"], tmp_path, 600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    ids = {f["id"] for f in out["patient_facts"]["facts"]}
    assert {"D1", "D2", "P1", "M1", "L1"} <= ids
    assert len(out["trials"]) == 1
    trial = out["trials"][0]
    assert trial["verdict"] in ("ELIGIBLE", "NOT_ELIGIBLE", "EXCLUDED", "UNCERTAIN")
    judged = [c for c in trial["criteria"] if c["judged_by"] == "model"]
    assert judged and out["stats"]["model_calls"] >= len(judged)
    for c in trial["criteria"]:
        assert c["verdict"] in ("passes", "fails", "unknown")
        assert set(c["cited_facts"]) <= ids  # checked by code: never an id the chart does not hold
        if c["type"] == "exclusion":
            assert {"present": "fails", "absent": "passes", "unknown": "unknown"}[c["exclusion_condition"]] == c["verdict"]
    if trial["verdict"] == "UNCERTAIN":
        assert len(trial["questions"]) == trial["unknown_count"] > 0
    text = run(["prescreen", "abc-123", "--max-trials", "1", "--condition", "hypertension"], tmp_path, 600)
    assert text.returncode == 0, text.stderr[-3000:]
    assert "Patient facts used:" in text.stdout and "NCT-DEMO-0002" in text.stdout
