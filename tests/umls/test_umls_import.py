"""The RRF importer on small MRCONSO/MRSTY fixtures, and the synthetic-release builder."""

from __future__ import annotations

import io
import sys

import pytest

from mcp_servers.umls import foundation, lookup, store
from mcp_servers.umls import importer as umls_import
from mcp_servers.umls import search as umls_search
from tests.umls.conftest import FIXTURES

RRF = FIXTURES / "rrf"


@pytest.fixture
def imported(tmp_path):
    path = tmp_path / "umls.sqlite"
    seen: list[tuple[int, int]] = []
    messages: list[str] = []
    report = umls_import.import_rrf(path, RRF, progress=messages.append,
                                    byte_progress=lambda done, total: seen.append((done, total)))
    return path, report, (seen, messages)


def _dump(path) -> list:
    db = foundation.connect(path, read_only=True)
    try:
        return [db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("concepts", "semtypes", "words")] + [
            db.execute("SELECT cui, str, sab, tty, code, pref_rank FROM atoms ORDER BY cui, str, sab, tty").fetchall()]
    finally:
        db.close()


def test_import_keeps_and_skips_the_right_rows(imported):
    _, report, _ = imported
    assert report.rows_read == 15
    assert report.skipped == {"non-English": 3, "suppressed": 2, "other source vocabularies": 1,
                              "malformed MRCONSO.RRF lines": 1}
    assert report.atoms_kept == 9 and report.concepts == 3
    assert report.semtype_rows_read == 5 and report.semtype_rows_kept == 4
    assert "3 concepts" in report.summary() and "3 non-English" in report.summary()


def test_import_derives_names_and_codes(imported):
    path, _, _ = imported
    db = foundation.connect(path, read_only=True)
    rows = {r[0]: r[1:] for r in db.execute("SELECT cui, name, snomed_code, rxnorm, loinc FROM concepts")}
    # TS=P, STT=PF, ISPREF=Y wins over earlier and later rows of the same concept.
    assert rows["C0020538"] == ("Hypertensive disorder, systemic arterial (disorder)", "38341003", None, None)
    assert rows["C0000970"] == ("acetaminophen", "387517004", "161", None)
    assert rows["C0474680"] == ("Hemoglobin A1c/Hemoglobin.total in Blood", "43396009", None, "4548-4")
    assert "C9999901" not in rows  # only non-English names
    strings = {r[0] for r in db.execute("SELECT str FROM atoms")}
    assert not strings & {"Hypertension artérielle", "Obsolete hypertension term", "Hydroxyacetanilide",
                          "High blood pressure (MedlinePlus)"}
    assert lookup.semantic_types(db, "C0000970")["is_drug"] is True


def test_imported_database_searches_like_the_starter(imported):
    path, _, _ = imported
    db = foundation.connect(path, read_only=True)
    best = umls_search.search(db, "Paracetamol", 1)[0]
    assert (best["cui"], best["source"], best["score"]) == ("C0000970", "SNOMEDCT_US", 0.9)
    assert umls_search.search(db, "acetaminophen", 1)[0]["score"] == 1.0
    htn = umls_search.search(db, "HTN", 1)[0]  # curated abbreviation added to the imported concept
    assert (htn["cui"], htn["source"]) == ("C0020538", "CURATED")
    assert umls_search.search(db, "Tylenol", 1)[0]["cui"] == "C0000970"
    assert umls_search.search(db, "hypertensve", 1)[0]["match_type"] == "fuzzy"
    assert "Tylenol" in lookup.drug_names(db)


def test_progress_reports_bytes_up_to_the_total(imported):
    _, report, (seen, messages) = imported
    total = (RRF / "MRCONSO.RRF").stat().st_size + (RRF / "MRSTY.RRF").stat().st_size
    assert seen[-1] == (total, total) == (report.bytes_read, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    reading = [m for m in messages if "MB read" in m]
    assert reading[-1].endswith("(100%)") and len(reading) == len(seen)
    assert messages[-1] == "UMLS import: done" and "UMLS import: building the typo index" in messages


def test_import_is_idempotent_and_survives_ensure_database(imported):
    path, _, _ = imported
    first = _dump(path)
    umls_import.import_rrf(path, RRF)
    assert _dump(path) == first
    messages: list[str] = []
    store.ensure_database(path, messages.append)
    assert "starter subset not loaded" in messages[-1]
    assert _dump(path) == first


def test_import_replaces_starter_content_only_when_told_to_shrink_it(tmp_path):
    path = tmp_path / "umls.sqlite"
    store.ensure_database(path)
    with pytest.raises(umls_import.UmlsImportError, match="would replace the store's 356 concepts with 3"):
        umls_import.import_rrf(path, RRF)
    db = foundation.connect(path, read_only=True)
    assert db.execute("SELECT COUNT(*) FROM concepts").fetchone()[0] == 356  # rolled back whole
    report = umls_import.import_rrf(path, RRF, replace=True)
    assert (report.previous_concepts, report.concepts) == (356, 3)
    assert db.execute("SELECT COUNT(*) FROM concepts").fetchone()[0] == 3


def test_missing_files_are_reported(tmp_path):
    with pytest.raises(umls_import.UmlsImportError, match="MRCONSO.RRF"):
        umls_import.import_rrf(tmp_path / "u.sqlite", tmp_path)


def test_input_without_kept_rows_leaves_the_database_alone(tmp_path):
    path = tmp_path / "umls.sqlite"
    store.ensure_database(path)
    before = _dump(path)
    empty = tmp_path / "rrf"
    empty.mkdir()
    (empty / "MRCONSO.RRF").write_text((RRF / "MRCONSO.RRF").read_text().replace("|ENG|", "|FRE|"))
    (empty / "MRSTY.RRF").write_text((RRF / "MRSTY.RRF").read_text())
    with pytest.raises(umls_import.UmlsImportError, match="no English"):
        umls_import.import_rrf(path, empty)
    assert _dump(path) == before


def test_build_synthetic_goes_through_the_import(tmp_path):
    path = tmp_path / "synthetic.sqlite"
    report = umls_import.build_synthetic(path, 200)
    assert report.concepts == 200
    assert report.skipped["non-English"] == 20 and report.skipped["suppressed"] == 20
    assert report.skipped["other source vocabularies"] == 20
    db = foundation.connect(path, read_only=True)
    name = db.execute("SELECT name FROM concepts WHERE cui = 'C9000123'").fetchone()[0]
    results = umls_search.search(db, name, 25)
    mine = [r for r in results if r["cui"] == "C9000123"]
    assert mine and mine[0]["score"] == 1.0 and mine[0]["snomed_code"] == "100123"


def test_progress_goes_on_past_reading_through_the_index_builds(tmp_path):
    events: list[tuple] = []
    umls_import.import_rrf(tmp_path / "umls.sqlite", RRF, byte_progress=lambda d, t: events.append(("bytes", d, t)),
                           stage=lambda name: events.append(("stage", name)))
    last_bytes = max(i for i, e in enumerate(events) if e[0] == "bytes")
    assert events[last_bytes][1] == events[last_bytes][2]  # reading reached 100%
    stages = [e[1] for e in events[last_bytes + 1:]]
    assert stages == ["adding curated names", "deriving concepts and codes", "building the full-text index",
                      "building the typo index", "writing the database", "done"]


def test_cli_progress_bar_shows_the_stages(tmp_path, monkeypatch, capsys):
    """On stderr when it is a terminal; stdout carries only the result the caller prints."""
    from appliance.setup.importers import run_import

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path / "home"))
    summary = run_import("umls", "rrf", RRF, replace=True).summary()  # 3 fixture concepts replace the 356 curated ones
    assert capsys.readouterr().out == ""
    out = terminal.getvalue()
    assert "100.0%" in out and "3 concepts" in summary
    assert out.index("building the full-text index") < out.index("building the typo index") < out.index("- done")
