"""`appliance eval trialgpt` with a scripted model: file order, the label mapping, the citation
rule, the GPT-4 baseline on the same rows, the run directory, resume, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from appliance.llm.fake import ScriptedModel
from appliance.prescreen import trialgpt
from appliance.prescreen.metrics import agreement
from common.locations import PROJECT_ROOT

NOTE_A = "0. A 64-year-old man with type 2 diabetes.\n1. He takes metformin.\n2. No history of cancer."
NOTE_B = "0. A 30-year-old pregnant woman.\n1. Asthma since childhood."


def row(i, note, kind, expert, gpt4, expert_sentences="[0]", gpt4_sentences="[]", patient="p-a"):
    return {"annotation_id": i, "patient_id": patient, "note": note, "trial_id": f"NCT0000000{i % 10}",
            "trial_title": "t", "criterion_type": kind, "criterion_text": f"criterion number {i}",
            "expert_eligibility": expert, "gpt4_eligibility": gpt4, "expert_sentences": expert_sentences,
            "gpt4_sentences": gpt4_sentences, "gpt4_explanation": "", "explanation_correctness": "", "training": True}


def inc(answer, cited=("0",)):
    return {"meets_criterion": answer, "cited_facts": list(cited), "reason": "from the note"}


def exc(answer, cited=("1",)):
    return {"excluding_condition_present": answer, "cited_facts": list(cited), "reason": "from the note"}


@pytest.fixture
def small(tmp_path):
    rows = [
        row(0, NOTE_A, "inclusion", "included", "included"),
        row(1, NOTE_A, "exclusion", "not excluded", "excluded", "[2]", "[2]"),
        row(2, NOTE_A, "inclusion", "not included", "not enough information"),
        row(3, NOTE_B, "exclusion", "excluded", "excluded", "[0]", "[0]", patient="p-b"),
        row(4, NOTE_B, "inclusion", "not enough information", "included", "[]", "[1]", patient="p-b"),
    ]
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(rows))
    return path


def scripted():
    return ScriptedModel({
        "CRITERION_INCLUSION": [inc("yes"), inc("yes"), inc("no", cited=("9",))],  # rows 0, 2, 4
        "CRITERION_EXCLUSION": [exc("no", cited=("2",)), exc("yes", cited=("0",))],  # rows 1, 3
    })


def test_rows_are_judged_in_file_order_and_scored_as_published(small, tmp_path):
    model = scripted()
    run = tmp_path / "run"
    run.mkdir()
    m = trialgpt.run_trialgpt(model, run, data=small)
    lines = [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines()]
    assert [r["row"] for r in lines] == [0, 1, 2, 3, 4]
    assert [c.node for c in model.history] == ["CRITERION_INCLUSION", "CRITERION_EXCLUSION", "CRITERION_INCLUSION",
                                                "CRITERION_EXCLUSION", "CRITERION_INCLUSION"]
    # expert six-way -> three classes; exclusion "no" (condition absent) -> the patient passes
    assert [r["gold"] for r in lines] == ["passes", "passes", "fails", "fails", "unknown"]
    assert [r["predicted"] for r in lines] == ["passes", "passes", "passes", "fails", "unknown"]
    # row 4: "no" citing sentence 9, which the note does not have: unknown by the citation rule
    assert lines[4]["model_verdict"] == "fails" and lines[4]["cited"] == [] and "without citing" in lines[4]["note"]
    assert m["n"] == 5 and m["accuracy"] == 0.8 and m["errors"] == 0 and m["complete"]
    assert m["without_citation_rule"]["accuracy"] == 0.6  # rows 2 and 4 wrong on the model's own answers
    # GPT-4 on the same five rows: passes, fails, unknown, fails, passes against the experts
    assert m["gpt4"] == agreement(["passes", "passes", "fails", "fails", "unknown"],
                                  ["passes", "fails", "unknown", "fails", "passes"], trialgpt.CLASSES)
    assert m["gpt4"]["accuracy"] == 0.4
    assert m["by_criterion_type"]["exclusion"]["ours"]["n"] == 2
    # evidence: ours cited 0,2,0,0 against the experts' 0,2,0,0,[] (row 4 cited nothing that exists)
    assert m["evidence_sentences"]["ours"]["precision"] == 1.0 and m["evidence_sentences"]["ours"]["recall"] == 1.0
    assert json.loads((run / "metrics.json").read_text()) == m == trialgpt.metrics_from_run(run)
    config = json.loads((run / "config.json").read_text())
    assert config["prompt_version"] == trialgpt.PROMPT_VERSION and config["rows"] == 5 and len(config["data_sha256"]) == 64


def test_limit_takes_the_first_rows(small, tmp_path):
    m = trialgpt.run_trialgpt(scripted(), tmp_path, data=small, limit=2)
    assert m["n"] == 2 and m["gpt4"]["n"] == 2


class StopsAfter(ScriptedModel):
    """A scripted model interrupted (as by Ctrl-C) at its nth call."""

    def __init__(self, n, replies):
        super().__init__(replies)
        self.n = n

    def generate_constrained(self, *a, **kw):
        if len(self.history) == self.n:
            raise KeyboardInterrupt
        return super().generate_constrained(*a, **kw)


def twelve_rows(tmp_path):
    rows = [row(i, NOTE_A, "inclusion", "included", "included") for i in range(12)]
    path = tmp_path / "twelve.json"
    path.write_text(json.dumps(rows))
    return path


def test_an_interrupted_run_resumes_without_redoing_finished_rows(tmp_path):
    data = twelve_rows(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(KeyboardInterrupt):
        trialgpt.run_trialgpt(StopsAfter(10, {"CRITERION_INCLUSION": [inc("yes")] * 12}), run, data=data)
    assert len((run / "rows.jsonl").read_text().splitlines()) == trialgpt.GROUP  # the first group was kept
    with (run / "rows.jsonl").open("a") as fh:
        fh.write('{"row": 8, "annotation')  # and a line torn by the interruption
    again = ScriptedModel({"CRITERION_INCLUSION": [inc("yes")] * 12})
    m = trialgpt.run_trialgpt(again, run, data=data, resume=True)
    assert len(again.history) == 12 - trialgpt.GROUP  # only the rows not written before
    assert m["n"] == 12 and m["complete"] and m["accuracy"] == 1.0
    assert sorted(Counter(json.loads(x)["row"] for x in (run / "rows.jsonl").read_text().splitlines()).items()) == \
        [(i, 1) for i in range(12)]


def test_a_resume_with_another_setup_or_a_second_run_in_one_folder_is_refused(small, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    trialgpt.run_trialgpt(scripted(), run, data=small, limit=3)
    with pytest.raises(trialgpt.TrialGPTDataError, match="another limit"):
        trialgpt.run_trialgpt(scripted(), run, data=small, limit=4, resume=True)
    with pytest.raises(trialgpt.TrialGPTDataError, match="already holds a run"):
        trialgpt.run_trialgpt(scripted(), run, data=small, limit=3)
    before = (run / "rows.jsonl").read_text()
    assert trialgpt.run_trialgpt(scripted(), run, data=small, limit=3, resume=True)["n"] == 3  # nothing left to do
    assert (run / "rows.jsonl").read_text() == before


@pytest.mark.parametrize("content, message", [
    ("not json", "is not JSON"),
    ("{}", "expected a non-empty list"),
    ('[{"patient_id": "x"}]', "row 0 has no 'annotation_id'"),
])
def test_files_that_are_not_the_annotation_format_are_refused(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(trialgpt.TrialGPTDataError, match=message):
        trialgpt.load_rows(path)


def test_unknown_labels_and_sentence_lists_are_refused(small, tmp_path):
    rows = json.loads(small.read_text())
    rows[1]["expert_eligibility"] = "eligible"
    (tmp_path / "a.json").write_text(json.dumps(rows))
    with pytest.raises(trialgpt.TrialGPTDataError, match="row 1: expert_eligibility 'eligible'"):
        trialgpt.load_rows(tmp_path / "a.json")
    rows[1]["expert_eligibility"], rows[2]["gpt4_sentences"] = "included", "[zero]"
    (tmp_path / "b.json").write_text(json.dumps(rows))
    with pytest.raises(trialgpt.TrialGPTDataError, match="row 2: gpt4_sentences"):
        trialgpt.load_rows(tmp_path / "b.json")


def test_the_development_split_loads_whole_with_its_published_label_counts():
    rows = trialgpt.load_rows(trialgpt.DEFAULT_DATA)
    assert len(rows) == 341 and len({r.patient_id for r in rows}) == 15
    assert Counter(trialgpt.LABELS[r.expert] for r in rows) == {"passes": 234, "unknown": 92, "fails": 15}


def _cli(*argv, home):
    env = {**os.environ, "APPLIANCE_HOME": str(home), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    return subprocess.run([sys.executable, "-m", "appliance.cli", "eval", "trialgpt", *argv], cwd=PROJECT_ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_command_refuses_a_bad_file_before_the_model_loads_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    done = _cli(str(bad), "--json", "--out", str(tmp_path / "runs"), home=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "row 0 is not an object" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()
    done = _cli("--resume", str(tmp_path / "nowhere"), home=tmp_path)
    assert done.returncode == 2 and "not a trialgpt run directory" in done.stderr


def test_the_command_runs_a_script_and_prints_the_metrics_object(small, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"CRITERION_INCLUSION": [inc("yes")] * 3, "CRITERION_EXCLUSION": [exc("no")] * 2}))
    done = _cli(str(small), "--script", str(script), "--json", "--out", str(tmp_path / "runs"), home=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {"n", "accuracy", "macro_f1", "kappa", "seconds", "rows_per_minute"} <= set(out)
    assert out["n"] == 5 and {"n", "accuracy", "macro_f1", "kappa"} <= set(out["gpt4"])
    run_dir = next((tmp_path / "runs").iterdir())
    assert {p.name for p in run_dir.iterdir()} == {"config.json", "rows.jsonl", "metrics.json"}
    again = _cli("--recompute", str(run_dir), "--json", home=tmp_path)
    assert json.loads(again.stdout) == out
