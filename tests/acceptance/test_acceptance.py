"""The acceptance run's scoring, verdict and store, on the oracle models (``oracle.py``): one
that answers every case right (every figure 1.0, accepted) and one that answers every case
wrong (not accepted, with reasons); a model file with another sha256 is not measured."""

from __future__ import annotations

import json

import pytest

from appliance.acceptance import store
from appliance.acceptance.cases import CaseSetError, load_cases
from appliance.acceptance.figures import wilson
from appliance.acceptance.nodes import args_match
from appliance.acceptance.run import RunDirectoryError, run_acceptance
from appliance.acceptance.thresholds import THRESHOLDS
from tests.acceptance.conftest import PERFECT, POOR, jobs
from tests.acceptance.oracle import Oracle

SHA = "a" * 64
OTHER = "b" * 64
IDENTITY = {"model": "medgemma-1.5-4b-it", "model_path": "/models/x.gguf", "model_sha256": SHA}
PRODUCTION = ("prod-intent-1", "prod-intent-2", "prod-intent-3", "prod-intent-4", "prod-tool-1", "prod-tool-2",
              "prod-tool-3", "prod-tool-4", "prod-result-1", "prod-result-2", "prod-result-3")


def _run(tmp_path, turn_agent, right: bool, figures: dict) -> dict:
    cases = load_cases()
    model = Oracle(cases, right=right)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return run_acceptance(model, run_dir, IDENTITY, turn_agent=turn_agent(model), evaluations=jobs(figures))


def test_the_shipped_set_has_150_requests_and_the_11_production_rows():
    cases = load_cases()
    assert len({c.request for c in cases}) >= 150
    assert sum(c.intent is not None for c in cases) >= 150
    assert tuple(c.id for c in cases if c.source == "production") == PRODUCTION
    assert {c.tool for c in cases if c.tool} >= {"check_drug_safety", "check_drug_interactions", "search_patient",
                                                  "get_patient_chart", "prescribe_medication", "find_clinical_trials"}
    assert 8 <= sum(c.turn is not None for c in cases) <= 20


def test_a_set_row_with_an_unknown_tool_is_refused(tmp_path):
    line = json.loads(load_cases.__globals__["DEFAULT_CASES"].read_text().splitlines()[4])
    bad = tmp_path / "cases.jsonl"
    bad.write_text(json.dumps({**line, "tool": "check_drug_safty"}) + "\n")
    with pytest.raises(CaseSetError, match="is not a tool"):
        load_cases(bad)


@pytest.mark.parametrize("expected,actual,ok", [
    ({"drug_name": "dofetilide"}, {"drug_name": "Dofetilide"}, True),
    ({"drug_names": ["aspirin", "warfarin"]}, {"drug_names": ["Warfarin", "aspirin"]}, True),
    ({"drug_names": ["aspirin", "warfarin"]}, {"drug_names": ["warfarin"]}, False),
    ({"condition": "type 2 diabetes"}, {"condition": "Type 2 diabetes mellitus"}, True),
    ({"condition": "type 2 diabetes"}, {"condition": "diabetes"}, False),
    ({"patient_id": "abc-123"}, {"patient_id": "abc-1234"}, False),
    ({"note_type": "progress"}, {"note_type": "progress"}, True),
])
def test_argument_matching_rule(expected, actual, ok):
    assert args_match(expected, actual) is ok


def test_wilson_interval():
    assert wilson(0, 0) is None
    low, high = wilson(93, 100)
    assert 0.85 < low < 0.87 and 0.96 < high < 0.97
    assert wilson(10, 10)[1] == 1.0 and wilson(0, 10)[0] == 0.0


def test_a_model_that_answers_every_case_right_is_accepted(tmp_path, appliance_home, turn_agent):
    result = _run(tmp_path, turn_agent, True, PERFECT)
    nodes = result["figures"]["nodes"]["nodes"]
    for key, f in nodes.items():
        if key == "result":  # code labels every result it can read: none is left to the model
            assert f["n"] == 0 and f["decided_by_code"] > 0, f
            continue
        assert f["accuracy"] == 1.0 and f["valid"] == 1.0 and f["n"] > 0, (key, f)
    turns = result["figures"]["turns"]
    assert turns["path"]["accuracy"] == turns["fact_guard"]["accuracy"] == turns["shown"]["accuracy"] == 1.0, turns
    assert result["complete"] and result["verdict"]["accepted"], result["verdict"]["reasons"]
    assert all(c["met"] for c in result["verdict"]["checks"])
    status = store.status_for(SHA)
    assert status.accepted and status.line.startswith("accepted on ")
    assert "intent 1.00, tools 1.00" in status.line
    assert json.loads((tmp_path / "run" / "result.json").read_text())["verdict"]["accepted"]


def test_a_model_that_answers_every_case_wrong_is_not_accepted_with_reasons(tmp_path, appliance_home, turn_agent):
    result = _run(tmp_path, turn_agent, False, POOR)
    nodes = result["figures"]["nodes"]["nodes"]
    for key in ("intent", "tool", "arguments", "retry"):
        assert nodes[key]["accuracy"] == 0.0, (key, nodes[key])
    assert nodes["result"]["n"] == 0  # code labels every result it can read, wrong model or not
    assert nodes["arguments"]["decided_by_code"] > 0  # rows whose values code fills in are not the model's
    assert result["figures"]["turns"]["path"]["accuracy"] < 0.5
    assert result["figures"]["turns"]["fact_guard"]["answers_withheld"] > 0
    v = result["verdict"]
    assert not v["accepted"]
    for short in ("intent", "tools", "arguments", "retry", "turn paths", "fact guard", "answers shown",
                  "trialgpt kappa",
                  "grounded", "extraction recall", "invented"):
        assert any(r.startswith(short + " ") for r in v["reasons"]), (short, v["reasons"])
    status = store.status_for(SHA)
    assert status.state == "not accepted" and status.line.startswith("not accepted: intent 0.0 ")


def test_another_model_file_is_not_measured_until_measured(tmp_path, appliance_home, turn_agent):
    _run(tmp_path, turn_agent, True, PERFECT)
    assert store.status_for(SHA).accepted
    other = store.status_for(OTHER)
    assert other.state == "not measured" and not other.accepted and other.line == store.NOT_MEASURED
    assert store.status_for(None).state == "not measured"


def test_a_partial_run_is_never_accepted_nor_recorded(tmp_path, appliance_home, turn_agent):
    cases = load_cases()
    model = Oracle(cases, right=True)
    (tmp_path / "run").mkdir()
    result = run_acceptance(model, tmp_path / "run", IDENTITY, limit=20, turn_agent=turn_agent(model),
                            evaluations=jobs(PERFECT))
    assert not result["verdict"]["accepted"] and not result["recorded"]
    assert result["verdict"]["reasons"][0].startswith("a partial run")
    assert store.status_for(SHA).state == "not measured"


def test_a_stopped_run_resumes_without_redoing_its_cases(tmp_path, appliance_home, turn_agent):
    cases = load_cases()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    first = Oracle(cases, right=True)
    run_acceptance(first, run_dir, IDENTITY, limit=30, turn_agent=turn_agent(first), evaluations=jobs(PERFECT))
    lines = (run_dir / "nodes.jsonl").read_text().splitlines()
    (run_dir / "nodes.jsonl").write_text("\n".join(lines[:10]) + "\n" + lines[10][:15])  # stopped mid-line
    again = Oracle(cases, right=True)
    result = run_acceptance(again, run_dir, IDENTITY, limit=30, resume=True, turn_agent=turn_agent(again),
                            evaluations=jobs(PERFECT))
    assert result["figures"]["nodes"]["cases"] == 30
    assert 0 < again.calls < first.calls  # only the 20 cases not finished (turns were all done)
    with pytest.raises(RunDirectoryError, match="another model sha256"):
        run_acceptance(again, run_dir, {**IDENTITY, "model_sha256": OTHER}, limit=30, resume=True,
                       evaluations=jobs(PERFECT))


def test_a_damaged_result_file_reads_as_not_measured(appliance_home):
    (appliance_home / "acceptance").mkdir()
    (appliance_home / "acceptance" / f"{SHA}.json").write_text("{not json")
    assert store.status_for(SHA).state == "not measured"


def test_an_unpinned_file_is_hashed_once_and_rehashed_when_it_changes(tmp_path, appliance_home):
    import hashlib
    import os

    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + b"x" * 100)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert store.file_sha256(path) == digest
    assert store.file_sha256(path, "C" * 64) == "c" * 64  # a pinned sha256 is trusted (checked at load)
    path.write_bytes(b"GGUF" + b"y" * 100)
    os.utime(path, ns=(0, 0))
    assert store.file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_threshold_has_a_reason_and_a_unique_name():
    assert len({t.short for t in THRESHOLDS}) == len(THRESHOLDS)
    assert all(t.reason and 0 < t.value for t in THRESHOLDS)


def test_the_notice_follows_acceptance_not_the_profile():
    from models.profiles import DEMO_NOTICE, NOT_VALIDATED_NOTICE, get_profile

    clinical, demo = get_profile("medgemma-1.5-4b-it"), get_profile("gemma3-270m")
    assert clinical.notice_for(False) == NOT_VALIDATED_NOTICE and clinical.notice == NOT_VALIDATED_NOTICE
    assert clinical.notice_for(True) is None
    assert demo.notice_for(True) == DEMO_NOTICE  # a demo model stays one, accepted or not
