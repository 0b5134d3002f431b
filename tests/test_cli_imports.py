"""``appliance <area> import`` on the importers' real-format fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.cli import main

FIXTURES = Path(__file__).parent


@pytest.mark.parametrize("argv", [
    ["ehr", "import", str(FIXTURES / "ehr/fixtures/synthea_bundle.json")],
    ["knowledge", "import", "openfda", str(FIXTURES / "knowledge/fixtures/openfda/drug-label-0001-of-0001.json")],
    ["knowledge", "import", "pubmed", str(FIXTURES / "knowledge/fixtures/pubmed/pubmed24n0001-fixture.xml")],
    ["knowledge", "import", "ctgov", str(FIXTURES / "knowledge/fixtures/ctgov/studies-page-1.json")],
])
def test_imports_report_and_are_idempotent(argv, appliance_home, capsys):
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    second = capsys.readouterr().out
    assert first.strip() and second.strip()
    assert first != second  # the second run reports nothing new


def test_missing_input_is_a_clear_error(appliance_home, capsys):
    assert main(["ehr", "import", str(appliance_home / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err


def test_malformed_bundle_is_a_clear_error(appliance_home, capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    assert main(["ehr", "import", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "import" in err and "Traceback" not in err


# -- imports never quietly change what clinicians rely on, nor half-import a file -------
def _bundle(path: Path, *resources: dict) -> Path:
    import json

    path.write_text(json.dumps({"resourceType": "Bundle", "type": "collection",
                                "entry": [{"resource": r} for r in resources]}))
    return path


POLLEN = {"resourceType": "AllergyIntolerance", "id": "pat-006-alg-1", "patient": {"reference": "Patient/pat-006"},
          "code": {"text": "Pollen"}, "recordedDate": "2026-01-01",
          "reaction": [{"manifestation": [{"text": "Sneezing"}], "severity": "mild"}]}


def _one_line_failure(capsys) -> tuple[str, str]:
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert len(err.strip().splitlines()) == 1 and err.startswith("appliance: "), err
    return out, err


def _allergies(home: Path) -> list[tuple]:
    import sqlite3

    conn = sqlite3.connect(home / "ehr.sqlite")
    try:
        return conn.execute("SELECT substance, severity FROM allergy_intolerances WHERE patient_id = 'pat-006'").fetchall()
    finally:
        conn.close()


def test_an_import_that_would_replace_an_allergy_prints_the_differences_and_stops(appliance_home, capsys, tmp_path):
    path = _bundle(tmp_path / "pollen.json", POLLEN)
    assert main(["init", "--no-model"]) == 0
    capsys.readouterr()
    before = _allergies(appliance_home)
    assert main(["ehr", "import", str(path)]) == 2
    out, err = _one_line_failure(capsys)
    assert "stopped before writing" in out and "substance 'Penicillin' -> 'Pollen'" in out
    assert "severity 'severe' -> 'mild'" in out and "--accept-changes" in err
    assert _allergies(appliance_home) == before == [("Penicillin", "severe")]
    assert main(["ehr", "import", str(path), "--accept-changes"]) == 0
    assert "accepted 3 change(s)" in capsys.readouterr().out
    assert _allergies(appliance_home) == [("Pollen", "mild")]
    assert main(["audit", "verify"]) == 0


@pytest.mark.parametrize("content,words", [
    ('{"resourceType": "Bundle", "type": "collection", "entry": [{"resource": ', "not valid JSON"),
    ('{"resourceType": "Bundle", "type": "collection", "entry": [' + "[" * 100_000 + "]" * 100_000 + "]}",
     "nested too deeply"),
    ('{"resourceType": "Bundle", "type": "collection", "entry": ['
     '{"resource": {"resourceType": "Condition", "id": "c-1"}}, {"resource": {"resourceType": "Condition", "id": "c-1"}}]}',
     "holds Condition c-1 twice"),
    ('{"resourceType": "Bundle", "type": "collection", "entry": [{"resource": {"resourceType": "Observation", '
     '"id": "o-1", "status": "final", "subject": {"reference": "Patient/abc-123"}, "effectiveDateTime": "2026", '
     '"category": [{"coding": [{"code": "laboratory"}]}], "code": {"coding": [{"system": "http://loinc.org", '
     '"code": "4548-4"}], "text": "HbA1c"}, "valueQuantity": {"value": 1e30, "unit": "%"}}}]}',
     "valueQuantity.value is outside physiological limits"),
], ids=["truncated", "nested-100000-deep", "duplicate-id", "hba1c-1e30"])
def test_a_bundle_refused_whole_is_one_line_and_exit_2(appliance_home, capsys, tmp_path, content, words):
    from tests.ehr.ehr_helpers import row_counts

    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["init", "--no-model"]) == 0
    capsys.readouterr()
    before = row_counts(appliance_home / "ehr.sqlite")
    assert main(["ehr", "import", str(path)]) == 2
    _, err = _one_line_failure(capsys)
    assert words in err and "nothing was imported" in err
    assert row_counts(appliance_home / "ehr.sqlite") == before


@pytest.mark.parametrize("kind,content,words", [
    ("openfda", None, "cannot be read in full (not valid JSON"),  # the fixture cut after its first label
    ("openfda", b'{"results":[{"openfda":"x"}]}', "openfda is not an object"),
    ("openfda", b"\x89PNG\r\n\x1a\n\x00\x00binary", "cannot be read in full (not UTF-8 text)"),
    ("openfda", b'{"results": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ("ctgov", b'{"studies": [{"protocolSection": {"identificationModule": {"nctId": "NCT01234567", "briefTitle": "A"}}},'
              b' {"protocolSection": {"identificationModule": {"nctId": "NCT0', "cannot be read in full"),
    ("ctgov", b'{"studies": [' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_000 + b"]}", "nested too deeply"),
    ("pubmed", b"<?xml version=\"1.0\"?><PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>1</PMID>",
     "cannot be read in full (not well-formed XML"),
], ids=["openfda-truncated", "openfda-a-string", "openfda-unreadable", "openfda-nested", "ctgov-truncated",
        "ctgov-nested", "pubmed-truncated"])
def test_a_knowledge_file_that_cannot_be_read_in_full_is_one_line_exit_2_and_nothing_imported(
        appliance_home, capsys, tmp_path, kind, content, words):
    from mcp_servers.knowledge.store import connect, ensure_database

    path = tmp_path / ("labels.json" if kind != "pubmed" else "articles.xml")
    if content is None:
        text = (FIXTURES / "knowledge/fixtures/openfda/drug-label-0001-of-0001.json").read_text()
        content = text[: text.index('"set_id": "fixture-set-atorvastatin"')].encode()
    path.write_bytes(content)
    db_path = appliance_home / "knowledge.sqlite"
    ensure_database(db_path)

    def sizes() -> tuple:
        db = connect(db_path, read_only=True)
        try:
            return tuple(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("drugs", "articles", "trials"))
        finally:
            db.close()

    before = sizes()
    assert main(["knowledge", "import", kind, str(path)]) == 2
    _, err = _one_line_failure(capsys)
    assert words in err, err
    assert sizes() == before


def test_a_truncated_umls_release_is_one_line_exit_2(appliance_home, capsys, tmp_path):
    from mcp_servers.umls.importer import write_synthetic_rrf

    meta = tmp_path / "META"
    write_synthetic_rrf(meta, 50)
    text = (meta / "MRCONSO.RRF").read_bytes()
    (meta / "MRCONSO.RRF").write_bytes(text[: len(text) // 2 - 7])
    assert main(["umls", "import", str(meta), "--replace"]) == 2
    _, err = _one_line_failure(capsys)
    assert "MRCONSO.RRF cannot be read in full: it ends in the middle of a line" in err
