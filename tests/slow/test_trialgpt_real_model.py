"""`appliance eval trialgpt` on the shipped small model (a base model: its figures are not the
point; that every row gets a valid constrained judgement, the figures follow from the run
directory, and batched decoding with a shared patient prefix answers as the single calls do)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from appliance.llm.llama import LlamaModel
from appliance.prescreen import judge, trialgpt
from common.locations import PROJECT_ROOT, models_dir
from models.assemble import assemble_default_model
from models.profiles import get_profile


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_twenty_rows_on_the_real_model(tmp_path):
    assemble_default_model(models_dir())
    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path / "home"), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    done = subprocess.run([sys.executable, "-m", "appliance.cli", "eval", "trialgpt", "--limit", "20", "--json",
                           "--out", str(tmp_path / "runs")], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=840)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["n"] == 20 and out["complete"] and out["errors"] == 0
    assert out["gpt4"]["n"] == 20 and 0.0 <= out["accuracy"] <= 1.0 and -1.0 <= out["kappa"] <= 1.0
    assert out["seconds"] > 0 and out["rows_per_minute"] > 0
    assert out["model_sha256"] == get_profile("gemma3-270m").sha256
    run_dir = next((tmp_path / "runs").iterdir())
    rows = [json.loads(x) for x in (run_dir / "rows.jsonl").read_text().splitlines()]
    assert [r["row"] for r in rows] == list(range(20))
    notes = trialgpt.load_rows(trialgpt.DEFAULT_DATA)[:20]
    for r, row in zip(rows, notes):
        assert r["predicted"] in trialgpt.CLASSES and r["model_verdict"] in trialgpt.CLASSES
        # citations are sentence numbers the note holds, checked by code
        assert set(r["cited"]) <= judge.note_evidence(row.note).ids
    assert trialgpt.metrics_from_run(run_dir) == out


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    return LlamaModel(get_profile("gemma3-270m"), assemble_default_model(models_dir()), n_threads=2)


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_batched_criteria_sharing_a_patient_prefix_answer_like_single_calls(model):
    rows = trialgpt.load_rows(trialgpt.DEFAULT_DATA)[40:56]  # the end of one patient, the start of the next
    assert len({r.patient_id for r in rows}) == 2
    calls = [judge.prepare(judge.note_evidence(r.note), r.criterion_text, r.criterion_type) for r in rows]
    single = judge.evaluate_criteria(model, calls, parallel=1)
    batched = judge.evaluate_criteria(model, calls, parallel=8)
    assert all(not isinstance(j, Exception) for j in single + batched), [j for j in single + batched if isinstance(j, Exception)]
    same = sum(s.model_verdict == b.model_verdict and s.cited == b.cited for s, b in zip(single, batched))
    # greedy decoding of the same prompt: batched kernels may round differently, rarely enough to flip a token
    assert same >= len(calls) - 2, [(s.model_verdict, b.model_verdict) for s, b in zip(single, batched)]
