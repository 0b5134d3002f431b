"""`appliance ground` and `appliance eval grounding` with a scripted model: output shapes, the run
directory, metrics recomputed from it, and refusals before any model loads."""

from __future__ import annotations

import json

import pytest

from appliance.cli import main
from appliance.grounding.evaluation import distinct_criteria
from appliance.grounding.loop import NODE_EVALUATE, NODE_EXTRACT

TEXT = "Patients taking acetaminophen for osteoarthritis; no heparin in the last 30 days"


def script(tmp_path, extract: list, evaluate: list | None = None):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({NODE_EXTRACT: extract, NODE_EVALUATE: evaluate or []}))
    return str(path)


def entities(*items) -> dict:
    return {"entities": [{"text": t, "type": k, "search_term": s} for t, k, s in items]}


def test_ground_json_prints_entities_with_a_method_and_a_confidence(appliance_home, tmp_path, capsys):
    s = script(tmp_path, [entities(("acetaminophen", "Medication", "acetaminophen"),
                                   ("osteoarthritis", "Condition", "osteoarthritis"),
                                   ("last 30 days", "Demographic", "days"))])
    assert main(["ground", TEXT, "--script", s, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(e["text"], e["method"]) for e in data["entities"]] == [
        ("acetaminophen", "exact"), ("osteoarthritis", "exact"), ("last 30 days", "expert_review")]
    assert all(0.0 <= e["confidence"] <= 1.0 for e in data["entities"])
    assert data["stats"]["model_calls"] == 1 and data["stats"]["evaluate_calls_saved"] == 2


def test_ground_prints_one_line_per_entity_and_a_summary(appliance_home, tmp_path, capsys):
    s = script(tmp_path, [entities(("heparin", "Medication", "heparin"))])
    assert main(["ground", TEXT, "--script", s]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("heparin [53, 60) Medication: exact 1.00 (accept)  C0019134")
    assert out[-1].startswith("1 entities: 1 exact, 0 model_selected, 0 expert_review; 1 model calls")


@pytest.mark.parametrize("argv,message", [
    (["ground", "   "], "nothing to ground"),
    (["ground", "x" * 4001], "longer than 4000"),
    (["eval", "grounding", "--limit", "0"], "--limit must be at least 1"),
    (["eval", "grounding", "--data", "/nonexistent/rows.json"], "does not exist"),
    (["eval", "grounding", "--recompute", "/nonexistent"], "not a grounding run directory"),
])
def test_refusals_are_one_line_and_exit_2(appliance_home, capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_script_for_other_nodes_is_refused(appliance_home, tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"INTENT_CLASSIFY": []}))
    assert main(["ground", TEXT, "--script", str(path)]) == 2
    assert "GROUNDING_EXTRACT" in capsys.readouterr().err


def test_eval_grounding_writes_rows_and_metrics_that_recompute(appliance_home, tmp_path, capsys):
    data = tmp_path / "criteria.json"
    rows = [{"annotation_id": 1, "trial_id": "NCT1", "criterion_type": "inclusion", "criterion_text": "Taking Tylenol"},
            {"annotation_id": 2, "trial_id": "NCT1", "criterion_type": "inclusion", "criterion_text": "Taking Tylenol"},
            {"annotation_id": 3, "trial_id": "NCT1", "criterion_type": "exclusion", "criterion_text": "sugar diabetes"},
            {"annotation_id": 4, "trial_id": "NCT2", "criterion_type": "exclusion", "criterion_text": "Pregnancy"}]
    data.write_text(json.dumps(rows))
    assert [c["annotation_id"] for c in distinct_criteria(data)] == [1, 3, 4]
    s = script(tmp_path, [entities(("Tylenol", "Medication", "acetaminophen")),
                          entities(("sugar diabetes", "Condition", "diabetes"), ("aspirin", "Medication", "aspirin"))],
               [{"decision": "select", "candidate": "2", "confidence": "high", "refine_terms": []}])
    out_root = tmp_path / "runs"
    assert main(["eval", "grounding", "--data", str(data), "--limit", "2", "--script", s, "--out", str(out_root),
                 "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    (run_dir,) = out_root.iterdir()
    lines = (run_dir / "rows.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["text"] == "sugar diabetes"
    config = json.loads((run_dir / "config.json").read_text())
    assert config["distinct_criteria"] == 3 and config["limit"] == 2 and config["grounding"]["max_iterations"] == 3
    assert metrics["criteria"] == 2 and metrics["entities"] == 2 and metrics["entities_per_criterion"] == 1.0
    assert metrics["methods"] == {"exact": 1, "model_selected": 1, "expert_review": 0}
    assert metrics["dropped_entities"] == 1 and metrics["rejected_codes"] == 0
    assert metrics["model_calls"] == 3 and metrics["evaluate_calls_saved_by_exact"] == 1
    assert metrics["model_call_share_saved_by_exact"] == 0.25
    assert metrics["extrapolated_seconds_all_distinct"] >= 0 and metrics["distinct_criteria_in_data"] == 3
    assert json.loads((run_dir / "metrics.json").read_text()) == metrics
    assert main(["eval", "grounding", "--recompute", str(run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == metrics
    assert main(["eval", "grounding", "--recompute", str(run_dir)]) == 0
    assert "methods: exact 50.0%, model_selected 50.0%, expert_review 0.0%" in capsys.readouterr().out


def test_a_failing_criterion_is_recorded_and_the_run_goes_on(appliance_home, tmp_path, capsys):
    data = tmp_path / "criteria.json"
    data.write_text(json.dumps([{"criterion_text": "x" * 4001}, {"criterion_text": "Taking Tylenol"}]))
    s = script(tmp_path, [entities(("Tylenol", "Medication", "acetaminophen"))])
    assert main(["eval", "grounding", "--data", str(data), "--script", s, "--out", str(tmp_path / "r"),
                 "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["criteria"] == 2 and metrics["criteria_with_errors"] == 1 and metrics["methods"]["exact"] == 1


def test_eval_exact_phrases_counts_the_fast_paths_reach_without_a_model(appliance_home, tmp_path, capsys):
    data = tmp_path / "criteria.json"
    data.write_text(json.dumps([{"criterion_text": "Taking Tylenol for type 2 diabetes mellitus; pregnancy or MI"},
                                {"criterion_text": "Written informed consent"}]))
    assert main(["eval", "grounding", "--exact-phrases", "--data", str(data), "--out", str(tmp_path / "r"),
                 "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert (metrics["criteria"], metrics["phrases"], metrics["criteria_with_a_phrase"]) == (2, 4, 1)
    assert metrics["evaluate_calls_saved_if_extracted"] == 4 and metrics["ambiguous_phrases"] == 0
    (run_dir,) = (tmp_path / "r").iterdir()
    row = json.loads((run_dir / "rows.jsonl").read_text().splitlines()[0])
    assert [p["text"] for p in row["phrases"]] == ["Tylenol", "type 2 diabetes mellitus", "pregnancy", "MI"]
    assert row["phrases"][1]["concepts"] == [{"cui": "C0011860", "name": "Type 2 diabetes mellitus",
                                              "snomed_code": "44054006"}]
    assert main(["eval", "grounding", "--recompute", str(run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == metrics
