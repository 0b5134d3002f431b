"""`eval trialgpt` with code deciding what a note's age and sex settle, and with the rows of the
published annotation file whose criterion is null (a trial that lists no exclusion criteria; the
experts' label "not excluded"): counted and scored as the published figures score every row."""

from __future__ import annotations

import json

import pytest

from appliance.llm.fake import ScriptedModel
from appliance.prescreen import decide, judge, trialgpt
from appliance.prescreen.subject import from_note

NOTE_MAN = "0. A 64-year-old man with type 2 diabetes.\n1. He takes metformin.\n2. No history of cancer."
NOTE_GIRL = "0. A 10-month-old girl with fever.\n1. She has a rash."


def row(i, note, kind, criterion, expert, gpt4="not enough information"):
    return {"annotation_id": i, "patient_id": f"p-{len(note)}", "note": note, "trial_id": f"NCT0000000{i % 10}",
            "trial_title": "t", "criterion_type": kind, "criterion_text": criterion, "expert_eligibility": expert,
            "gpt4_eligibility": gpt4, "expert_sentences": "[0]", "gpt4_sentences": "[0]", "gpt4_explanation": "",
            "explanation_correctness": "", "training": True}


ROWS = [
    row(0, NOTE_MAN, "inclusion", "Age ≥18 years", "included", "included"),  # code: passes
    row(1, NOTE_MAN, "exclusion", "Female sex", "not excluded", "not excluded"),  # code: absent
    row(2, NOTE_MAN, "inclusion", "Histologically confirmed mesothelioma", "not included"),  # the model's
    row(3, NOTE_MAN, "exclusion", None, "not excluded", "not excluded"),  # the trial lists no exclusion criteria
    row(4, NOTE_GIRL, "inclusion", "Age 18+", "not included", "included"),  # code: fails (10 months old)
    row(5, NOTE_GIRL, "exclusion", "", "not excluded", "excluded"),  # an empty criterion reads as null too
    row(6, NOTE_GIRL, "exclusion", "Known allergy to penicillin", "not enough information"),  # the model's
]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(ROWS))
    return path


def scripted() -> ScriptedModel:
    return ScriptedModel({"CRITERION_INCLUSION": [{"meets_criterion": "no", "cited_facts": ["1"], "reason": "No biopsy."}],
                          "CRITERION_EXCLUSION": [{"excluding_condition_present": "yes", "cited_facts": ["0"],
                                                   "reason": "Fever."}]})


def test_null_criterion_rows_load_and_count_and_need_no_model(data, tmp_path):
    rows = trialgpt.load_rows(data)  # the whole file, not refused at row 3
    assert [r.no_criterion for r in rows] == [False, False, False, True, False, True, False]
    model = scripted()
    run = tmp_path / "run"
    run.mkdir()
    m = trialgpt.run_trialgpt(model, run, data=data)
    records = [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines()]
    assert [r["decided_by"] for r in records] == ["code", "code", "model", "no_criterion", "code", "no_criterion", "model"]
    assert [c.node for c in model.history] == ["CRITERION_INCLUSION", "CRITERION_EXCLUSION"]  # rows 2 and 6 only
    assert [r["predicted"] for r in records] == ["passes", "passes", "fails", "passes", "fails", "passes", "fails"]
    assert records[3]["reason"] == "The trial lists no criterion of this type: nothing to fail."
    # scored as published: every row counts, with the experts' label
    assert m["n"] == 7 and m["null_criterion_rows"] == 2 and m["without_null_criterion_rows"]["n"] == 5
    assert m["accuracy"] == round(6 / 7, 4)  # only row 6 is wrong ("unknown" to the experts)
    config = json.loads((run / "config.json").read_text())
    assert config["null_criterion_rows_in_file"] == 2 and config["code_rules"] == decide.RULES_VERSION


def test_the_code_share_is_reported_beside_the_models(data, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    m = trialgpt.run_trialgpt(scripted(), run, data=data)
    shares = m["decided_by"]
    assert set(shares) == {"code", "model", "no_criterion"}
    assert (shares["code"]["n"], shares["code"]["accuracy"], shares["code"]["share"]) == (3, 1.0, round(3 / 7, 4))
    assert (shares["model"]["n"], shares["model"]["accuracy"]) == (2, 0.5)
    assert shares["code"]["gpt4"]["accuracy"] == round(2 / 3, 4)  # GPT-4 on the same three rows
    assert (shares["no_criterion"]["n"], shares["no_criterion"]["accuracy"]) == (2, 1.0)
    assert trialgpt.metrics_from_run(run) == m
    text = trialgpt.format_metrics(m)
    assert "decided by code (age, sex)" in text and "null-criterion rows: 2" in text


def test_a_resume_under_other_code_rules_is_refused(data, tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    trialgpt.run_trialgpt(scripted(), run, data=data, limit=2)
    monkeypatch.setattr(decide, "RULES_VERSION", "decide-0")
    with pytest.raises(trialgpt.TrialGPTDataError, match="another code rules"):
        trialgpt.run_trialgpt(scripted(), run, data=data, limit=2, resume=True)


def test_a_criterion_that_is_neither_text_nor_null_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{**ROWS[0], "criterion_text": 5}]))
    with pytest.raises(trialgpt.TrialGPTDataError, match="row 0: criterion_text must be text or null"):
        trialgpt.load_rows(path)


def test_on_the_published_development_split_code_decides_the_age_and_sex_criteria_rightly():
    """No model: which rows code settles from the note alone, and that it settles them as the
    experts did."""
    rows = trialgpt.load_rows(trialgpt.DEFAULT_DATA)
    decided = []
    for r in rows:
        judged = decide.decide_note(from_note(judge.note_evidence(r.note).text), r.criterion_text, r.criterion_type)
        if judged is not None:
            decided.append((r, judged))
    assert len(decided) == 15
    wrong = [(r.criterion_text, j.verdict, r.expert) for r, j in decided if j.verdict != trialgpt.LABELS[r.expert]]
    assert wrong == []
    assert all(j.cited == ("0",) for _r, j in decided)  # the note's first sentence gives age and sex
