"""`appliance extract` and `appliance eval extraction` end to end with a scripted model."""

from __future__ import annotations

import io
import json

from extraction_helpers import EXPECTED, PROTOCOL_PAGES, protocol_script

from appliance.cli import main
from appliance.cli.extract import ProgressBar
from appliance.extraction.evaluation import (
    RefBullet,
    match_score,
    reference_bullets,
    score_record,
    summary_json,
    totals,
    write_run,
)

RECORD_TEXT = """Inclusion Criteria:

* Age \\>= 18 years
* Unilateral pleural effusion

Exclusion Criteria:

1. Pregnancy
2. Life expectancy \\<3 months
"""


def test_extract_json_with_a_script(tmp_path, capsys):
    protocol = tmp_path / "p.txt"
    protocol.write_text("\f".join(PROTOCOL_PAGES))
    script = tmp_path / "script.json"
    script.write_text(json.dumps(protocol_script()))
    assert main(["extract", str(protocol), "--json", "--script", str(script)]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert [(c["text"], c["type"]) for c in data["criteria"]] == EXPECTED
    # the work stated before it starts; no progress bar (stderr is not a terminal) and no progress
    # lines for a run this short
    chars = sum(len(page) for page in PROTOCOL_PAGES)
    assert err == (f"extract: p.txt: 4 page(s), {chars} characters; up to 4 model call(s) to find the criteria, "
                   "then one or two per criterion found\n")


def test_extract_text_output(tmp_path, capsys):
    protocol = tmp_path / "p.txt"
    protocol.write_text("\f".join(PROTOCOL_PAGES))
    script = tmp_path / "script.json"
    script.write_text(json.dumps(protocol_script()))
    assert main(["extract", str(protocol), "--script", str(script)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("p.txt: 8 criteria (pages with criteria: 2, 3)")
    assert "  [inclusion] Age >= 18 years  (demographic; present; >= 18 years)" in out


def test_a_bad_script_is_one_line(tmp_path, capsys):
    protocol = tmp_path / "p.txt"
    protocol.write_text("Inclusion Criteria:\n\n* Adults\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"INTENT_CLASSIFY": []}))
    assert main(["extract", str(protocol), "--script", str(script)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "must be an object keyed by" in err


def test_the_progress_bar_draws_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    quiet, tty = io.StringIO(), Tty()
    for stream in (quiet, tty):
        bar = ProgressBar(stream)
        bar.show("pages", 1, 4, "criteria 0")
        bar.show("passages", 4, 4, "criteria 7")
        bar.close()
    assert quiet.getvalue() == ""
    assert "pages" in tty.getvalue() and "4/4  criteria 7" in tty.getvalue() and tty.getvalue().endswith("\n")


def test_reference_bullets_and_sides_come_from_the_record_text():
    assert reference_bullets(RECORD_TEXT) == [
        RefBullet("Age >= 18 years", "inclusion"), RefBullet("Unilateral pleural effusion", "inclusion"),
        RefBullet("Pregnancy", "exclusion"), RefBullet("Life expectancy <3 months", "exclusion")]
    assert all(b.side is None for b in reference_bullets("DISEASE CHARACTERISTICS:\n\n* Adults\n"))


def test_the_matching_rule():
    words = lambda t: set(t.lower().split())  # noqa: E731
    assert match_score(words("age 18 years"), words("age 18 years")) == (1.0, 1.0)
    assert match_score(words("not pregnant nursing"), words("not pregnant")) is not None  # an atomic piece
    assert match_score(words("18 over"), words("age 18 over")) is not None  # a bullet under its label
    assert match_score(words("pregnancy"), words("renal failure dialysis")) is None


def test_score_record_counts_recovered_invented_and_side_errors():
    bullets = reference_bullets(RECORD_TEXT)
    criteria = [
        {"text": "Age >= 18 years", "type": "inclusion", "provenance": {"model_type": "exclusion"}},
        {"text": "Pregnancy", "type": "inclusion", "provenance": {}},  # wrong side
        {"text": "Smoker", "type": "exclusion", "provenance": {}},  # invented
        {"text": "Life expectancy less than 3 months", "type": "exclusion", "provenance": {}},
    ]
    score = score_record(bullets, criteria)
    assert {k: score[k] for k in ("bullets", "recovered", "missed", "criteria", "invented", "side_checked",
                                  "side_errors", "model_side_checked", "model_side_errors")} == {
        "bullets": 4, "recovered": 3, "missed": 1, "criteria": 4, "invented": 1, "side_checked": 3,
        "side_errors": 1, "model_side_checked": 1, "model_side_errors": 1}
    assert score["missed_bullets"] == ["Unilateral pleural effusion"] and score["invented_criteria"] == ["Smoker"]


def _data_dir(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "trial_criteria_cache.json").write_text(json.dumps({
        "NCT00000001": {"brief_title": "One", "eligibility_criteria": RECORD_TEXT},
        "NCT00000002": {"brief_title": "Two", "eligibility_criteria": "Inclusion Criteria:\n\n* Adults aged 18 or over; able to give consent\n"},
    }))
    return data


def test_eval_extraction_json_on_the_code_path(tmp_path, capsys):
    script = tmp_path / "s.json"
    script.write_text("{}")
    out_dir = tmp_path / "run"
    assert main(["eval", "extraction", "--json", "--no-split", "--no-details", "--script", str(script),
                 "--data", str(_data_dir(tmp_path)), "--out", str(out_dir)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["nct_id"] for r in report["records"]] == ["NCT00000001", "NCT00000002"]
    assert report["total"]["bullets"] == 5 and report["total"]["recovered"] == 5
    assert report["total"]["invented"] == 0 and report["total"]["side_errors"] == 0
    assert report["total"]["paths"] == {"split:bullet": 5, "type:heading": 5}
    assert "Jaccard >= 0.6" in report["rule"]
    rows = [json.loads(line) for line in (out_dir / "rows.jsonl").read_text().splitlines()]
    assert totals(rows) == report["total"]  # every figure recomputes from the rows
    assert json.loads((out_dir / "config.json").read_text())["split"] is False


def test_eval_extraction_counts_the_models_split(tmp_path, capsys):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"EXTRACT_SPLIT": [{"criteria": ["Adults aged 18 or over", "able to give consent"]}]}))
    assert main(["eval", "extraction", "--no-details", "--script", str(script), "--data", str(_data_dir(tmp_path)),
                 "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "TOTAL" in out and "split:model 2" in out


def test_write_run_and_summary(tmp_path):
    report = {"rule": "r", "config": {"x": 1}, "records": [], "total": totals([])}
    write_run(report, tmp_path / "run")
    assert (tmp_path / "run" / "rows.jsonl").read_text() == ""
    assert summary_json(report)["total"]["recall"] is None


def test_extract_ground_attaches_each_criterions_grounding(tmp_path, capsys, appliance_home):
    protocol = tmp_path / "p.txt"
    protocol.write_text("Inclusion Criteria:\n\n* Type 2 diabetes\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({
        "GROUNDING_EXTRACT": [{"entities": [{"text": "Type 2 diabetes", "type": "Condition",
                                             "search_term": "type 2 diabetes mellitus"}]}],
        "GROUNDING_EVALUATE": [{"decision": "select", "candidate": "1", "confidence": "high", "refine_terms": []}],
    }))
    assert main(["extract", str(protocol), "--json", "--ground", "--no-details", "--script", str(script)]) == 0
    [crit] = json.loads(capsys.readouterr().out)["criteria"]
    assert crit["text"] == "Type 2 diabetes" and crit["type"] == "inclusion"
    [entity] = crit["grounding"]["entities"]
    assert entity["text"] == "Type 2 diabetes" and entity["cui"]


# -- bounded work -------------------------------------------------------------------------------
def test_a_protocol_over_the_limits_is_refused_before_the_model_loads(tmp_path, capsys):
    protocol = tmp_path / "long.txt"
    protocol.write_text("\f".join(f"Page {n}. Inclusion Criteria: adults." for n in range(400)))
    assert main(["extract", str(protocol)]) == 2  # no --script: the model would be loaded if it got that far
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "long.txt has 400 pages, more than the 300 allowed; nothing was extracted (raise the limit with " \
           "--max-pages)" in err
    assert main(["extract", str(protocol), "--max-pages", "500", "--max-chars", "1000"]) == 2
    err = capsys.readouterr().err
    assert "characters, more than the 1,000 allowed" in err and "(raise the limit with --max-chars)" in err


def test_a_big_text_file_is_estimated_and_refused_by_characters(tmp_path, capsys):
    protocol = tmp_path / "big.txt"
    protocol.write_text("Eligibility text that goes on. " * 70_000)  # one page of 2.2 million characters
    assert main(["extract", str(protocol)]) == 2
    err = capsys.readouterr().err
    assert "big.txt has 2,170,000 characters, more than the 1,500,000 allowed" in err and "--max-chars" in err


def test_the_estimate_counts_one_call_per_page_window():
    from appliance.cli.extract import estimate_calls
    from appliance.extraction import ExtractionConfig
    from appliance.extraction.loaders import Document, Page

    config = ExtractionConfig()
    window = config.page_cap * 3
    docs = [Document("a.txt", "text", (Page(1, "x" * 10), Page(2, "y" * (window * 3 + 1)))),
            Document("NCT01234567", "ctgov", (Page(1, "z" * window * 5),))]
    assert estimate_calls(docs, config) == 1 + 4  # CT.gov records need no page filter


def test_a_long_run_off_a_terminal_prints_a_line_per_tenth(capsys):
    from appliance.cli.extract import _Progress

    progress = _Progress(ProgressBar(io.StringIO()))
    for done in range(1, 201):
        progress.show("pages", done, 200, "criteria 0")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "extract: pages 20/200, criteria 0" and lines[-1] == "extract: pages 200/200, criteria 0"
    assert len(lines) == 10
