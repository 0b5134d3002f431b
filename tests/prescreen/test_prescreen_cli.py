"""``appliance prescreen`` at the edge: real servers (stdio), a scripted model, clear errors."""

from __future__ import annotations

import json

import pytest

from appliance.cli import main

SCRIPT = {
    "CRITERION_INCLUSION": [{"meets_criterion": "unknown", "cited_facts": [], "reason": "Not in the chart."},
                            {"meets_criterion": "yes", "cited_facts": ["L1"], "reason": "HbA1c 7.9%."},
                            {"meets_criterion": "no", "cited_facts": ["L4"], "reason": "eGFR below 45."}],
    "CRITERION_EXCLUSION": [{"excluding_condition_present": "no", "cited_facts": ["M1"], "reason": "Metformin only."},
                            {"excluding_condition_present": "no", "cited_facts": ["D2"], "reason": "Male."},
                            {"excluding_condition_present": "no", "cited_facts": ["P1"], "reason": "None recorded."}],
}


@pytest.fixture
def home(appliance_home):
    """A data home with the record and the knowledge cache built (``appliance init``)."""
    from appliance.setup.home import init_home

    init_home(progress=lambda _m: None, with_model=False)
    return appliance_home


@pytest.mark.parametrize("patient, words", [
    ("nobody-999", "no patient with ID nobody-999 in the health record"),
    ("bad id!", "'bad id!' is not a patient ID"),
])
def test_unknown_or_malformed_patient_is_one_line_and_exit_2(tmp_path, capsys, home, patient, words):
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    assert main(["prescreen", patient, "--script", str(script), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and words in captured.err and "Traceback" not in captured.err


def test_max_trials_out_of_range_is_exit_2(capsys, appliance_home):
    assert main(["prescreen", "abc-123", "--max-trials", "0"]) == 2
    assert "--max-trials must be between 1 and 20" in capsys.readouterr().err
    assert main(["prescreen", "abc-123", "--as-of", "yesterday"]) == 2
    assert "--as-of must be a date as YYYY-MM-DD, not 'yesterday'" in capsys.readouterr().err


def test_scripted_prescreen_prints_facts_and_trials_as_json(tmp_path, capsys, home):
    """NCT-DEMO-0001 for John Smith: the chart decides every criterion, each citing its fact."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    code = main(["prescreen", "abc-123", "--condition", "type 2 diabetes", "--max-trials", "1", "--json",
                 "--script", str(script), "--as-of", "2026-11-01"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["patient_facts"]["patient_id"] == "abc-123" and out["patient_facts"]["facts"][0]["id"] == "D1"
    (trial,) = out["trials"]
    assert trial["nct_id"] == "NCT-DEMO-0001" and trial["verdict"] == "NOT_ELIGIBLE"  # eGFR 42: fails "45 or higher"
    decided = {c["criterion"]: (c["decided_by"], c["verdict"], c["cited_facts"]) for c in trial["criteria"]}
    assert decided == {
        "Age 30 Years to 75 Years": ("code", "passes", ["D1"]),
        "Type 2 diabetes diagnosed within the last 12 months": ("code", "fails", ["P3"]),
        "HbA1c 6.5% to 9.0%": ("code", "passes", ["L1"]),
        "eGFR 45 mL/min/1.73 m2 or higher": ("code", "fails", ["L4"]),
        "Current insulin therapy": ("code", "passes", ["M1", "M2", "M3", "M4"]),
        "Pregnancy or planning pregnancy": ("code", "passes", ["D2"]),
        "History of lactic acidosis or metabolic acidosis": ("code", "unknown", []),
    }
    assert out["stats"]["model_calls"] == 0 and out["stats"]["as_of"] == "2026-11-01"
    assert out["search"]["calls"][0]["args"] == {"condition": "type 2 diabetes", "status": "recruiting", "sex": "male",
                                                 "patient_age": str(out["patient_facts"]["age"]), "page_size": "10"}
