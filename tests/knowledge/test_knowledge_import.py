"""Importers on small fixtures in the real bulk formats (openFDA, MEDLINE XML, ClinicalTrials.gov v2)."""

from __future__ import annotations

import gzip
import io
import shutil
import zipfile

import pytest

from mcp_servers.knowledge import queries
from mcp_servers.knowledge.importers.driver import (
    import_ctgov_studies,
    import_openfda_labels,
    import_pubmed_xml,
)
from mcp_servers.knowledge.importers.sources import ImportSourceError, iter_json_records
from mcp_servers.knowledge.store import connect
from mcp_servers.knowledge.trials import trial_details
from tests.knowledge.knowledge_helpers import FIXTURES, call

OPENFDA = FIXTURES / "openfda" / "drug-label-0001-of-0001.json"


def _counts(report) -> tuple:
    return report.inserted, report.updated, report.unchanged, report.deleted, dict(report.skipped)


def _drug_names(path) -> list[str]:
    db = connect(path, read_only=True)
    try:
        return [r[0] for r in db.execute("SELECT generic_name FROM drugs ORDER BY 1")]
    finally:
        db.close()


def _drop_starter_drug(path, generic: str) -> None:
    """Remove a shipped starter drug, so the fixture's labels for it are a drug new to the store
    (the starter data ships metoprolol; the fixture's two metoprolol labels are the 'new' drug)."""
    db = connect(path)
    try:
        with db.conn:
            for table in ("drugs", "drug_names"):
                db.execute(f"DELETE FROM {table} WHERE generic_name = ?", [generic])
            db.execute("DELETE FROM interactions WHERE ? IN (drug_a, drug_b)", [generic])
    finally:
        db.close()


def _trial_ids(path) -> list[str]:
    db = connect(path, read_only=True)
    try:
        return [r[0] for r in db.execute("SELECT nct_id FROM trials ORDER BY 1")]
    finally:
        db.close()


# -- streaming JSON --------------------------------------------------------------------------
@pytest.mark.parametrize("text, key, expected", [
    ('{"meta": {"a": [1, 2]}, "results": [{"x": 1}, {"x": 2}]}', "results", [{"x": 1}, {"x": 2}]),
    ('{"results": [], "meta": {}}', "results", []),
    ('[{"x": 1}, {"x": 2.5}]', "studies", [{"x": 1}, {"x": 2.5}]),
    ('{"protocolSection": {"a": 1}, "hasResults": false}', "studies", [{"protocolSection": {"a": 1}, "hasResults": False}]),
    ('{"studies": [{"n": 12345678901234}], "nextPageToken": "t"}', "studies", [{"n": 12345678901234}]),
])
def test_iter_json_records_shapes(text, key, expected):
    assert list(iter_json_records(io.BytesIO(text.encode()), key)) == expected


def test_iter_json_records_streams_across_small_chunks(monkeypatch):
    from mcp_servers.knowledge.importers import sources as knowledge_sources

    monkeypatch.setattr(knowledge_sources._JsonStream, "CHUNK", 7)
    records = [{"id": i, "text": "x" * (i * 13), "n": 10 ** i} for i in range(12)]
    import json

    blob = json.dumps({"meta": {"skip": 0}, "results": records}).encode()
    assert list(iter_json_records(io.BytesIO(blob), "results")) == records


# -- openFDA ---------------------------------------------------------------------------------
def test_openfda_import_counts_skips_and_is_idempotent(knowledge_db):
    _drop_starter_drug(knowledge_db, "metoprolol")
    first = import_openfda_labels(OPENFDA, knowledge_db)
    assert first.records == 7 and first.files == 1
    assert first.inserted == 1  # metoprolol is new; two labels map to it
    assert first.updated == 4  # metoprolol (second label merged), atorvastatin, ibuprofen brands, penicillin
    assert first.skipped == {
        "combination or multi-ingredient product": 1,
        "no openfda.generic_name (label not harmonised by openFDA)": 1,
    }
    second = import_openfda_labels(OPENFDA, knowledge_db)
    assert _counts(second) == (0, 0, 5, 0, first.skipped)
    assert "5 unchanged" in second.summary() and "combination or multi-ingredient product: 1" in second.summary()


def test_imported_label_for_a_new_drug_appears_in_vocabulary_and_safety(server, knowledge_db):
    _drop_starter_drug(knowledge_db, "metoprolol")
    before, _ = call("drug_vocabulary", {})
    assert "Lopressor" not in before["names"]
    import_openfda_labels(OPENFDA, knowledge_db)
    after, _ = call("drug_vocabulary", {})
    assert {"metoprolol", "Lopressor", "Toprol-XL"} <= set(after["names"])
    result, error = call("check_drug_safety", {"drug_name": "Toprol-XL"})
    assert error is None and result["drug"] == "metoprolol"
    # The newer tartrate label (effective 2023) wins over the 2019 succinate label.
    assert "fixture-set-metoprolol-tartrate" in result["source"] and result["demo_content"] is False
    assert result["boxed_warning"].startswith("WARNING: ISCHEMIC HEART DISEASE")
    assert result["contraindications"][0].startswith("Lopressor is contraindicated")  # heading stripped


def test_imported_label_replaces_demo_record_but_never_drops_a_boxed_warning(server, knowledge_db):
    report = import_openfda_labels(OPENFDA, knowledge_db)
    lipitor, _ = call("check_drug_safety", {"drug_name": "Lipitor"})
    assert lipitor["drug"] == "atorvastatin" and lipitor["source"].startswith("openFDA drug label")
    assert "Lipitor" in lipitor["brand_names"]
    advil, _ = call("check_drug_safety", {"drug_name": "Pain Reliever IB"})
    assert advil["drug"] == "ibuprofen" and advil["has_boxed_warning"] is True and advil["demo_content"] is True
    assert any("boxed warning" in note for note in report.notes)
    penicillin, _ = call("check_drug_safety", {"drug_name": "penicillin"})
    assert "fixture-set-penicillin-vk" in penicillin["source"]


def test_label_interaction_text_is_offered_when_no_curated_interaction_exists(server, knowledge_db):
    import_openfda_labels(OPENFDA, knowledge_db)
    result, _ = call("check_drug_interactions", {"drug_names": ["Lopressor", "Lanoxin"]})
    assert result["interactions"] == []
    [mention] = result["label_mentions"]
    assert mention["label_of"] == "metoprolol" and "digoxin" in mention["excerpt"]


def test_openfda_zip_download_format(tmp_path, knowledge_db):
    archive = tmp_path / "drug-label-0001-of-0001.json.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(OPENFDA, OPENFDA.name)
    _drop_starter_drug(knowledge_db, "metoprolol")
    report = import_openfda_labels(archive, knowledge_db)
    assert report.files == 1 and report.records == 7 and report.inserted == 1


def test_import_of_a_missing_or_empty_source_fails_clearly(tmp_path, knowledge_db):
    with pytest.raises(ImportSourceError):
        import_openfda_labels(tmp_path / "nope", knowledge_db)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImportSourceError):
        import_openfda_labels(tmp_path / "empty", knowledge_db)


def test_a_truncated_file_imports_nothing(tmp_path, knowledge_db):
    text = OPENFDA.read_text()
    broken = tmp_path / "broken.json"
    broken.write_text(text[: text.index('"set_id": "fixture-set-atorvastatin"')])  # one whole label before the cut
    before = _drug_names(knowledge_db)
    with pytest.raises(ImportSourceError, match=r"broken.json cannot be read in full \(not valid JSON at line \d+: "
                                                r"truncated or damaged\); nothing was imported"):
        import_openfda_labels(broken, knowledge_db)
    assert _drug_names(knowledge_db) == before


@pytest.mark.parametrize("content,words", [
    (b'{"results": [{"openfda": "x"}]}', r"record 1 is malformed \(openfda is not an object\)"),
    (b'{"results": [{"openfda": {"generic_name": 5}, "boxed_warning": 3}, {"openfda": {"generic_name": ["x"]}, '
     b'"contraindications": {"a": 1}, "set_id": []}]}', None),
    (b"\xff\xfe\x00garbage", r"cannot be read in full \(not UTF-8 text\)"),
    (b'{"results": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", r"nested too deeply to read"),
], ids=["openfda-a-string", "odd-types-are-skipped-or-refused", "not-utf8", "nested-100000-deep"])
def test_an_openfda_file_that_cannot_be_used_imports_nothing_and_never_raises_a_third_party_error(
        tmp_path, knowledge_db, content, words):
    path = tmp_path / "labels.json"
    path.write_bytes(content)
    before = _drug_names(knowledge_db)
    if words is None:
        try:
            import_openfda_labels(path, knowledge_db)
        except ImportSourceError:
            pass  # refused, one line; what matters is no AttributeError/TypeError
    else:
        with pytest.raises(ImportSourceError, match=words):
            import_openfda_labels(path, knowledge_db)
        assert _drug_names(knowledge_db) == before


@pytest.mark.parametrize("cut", ["half", "one-study"])
def test_a_truncated_ctgov_page_imports_nothing(tmp_path, knowledge_db, cut):
    text = (FIXTURES / "ctgov" / "studies-page-1.json").read_text()
    second = text.index('"protocolSection"', text.index('"protocolSection"') + 1)
    path = tmp_path / "page.json"
    path.write_text(text[: len(text) // 2] if cut == "half" else text[:second])
    before = _trial_ids(knowledge_db)
    with pytest.raises(ImportSourceError, match="page.json cannot be read in full"):
        import_ctgov_studies(path, knowledge_db)
    assert _trial_ids(knowledge_db) == before


def test_a_ctgov_study_nested_deeply_or_of_odd_types_never_raises_a_third_party_error(tmp_path, knowledge_db):
    deep = tmp_path / "deep.json"
    deep.write_text('{"studies": [' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "]}")
    with pytest.raises(ImportSourceError, match="nested too deeply"):
        import_ctgov_studies(deep, knowledge_db)
    odd = tmp_path / "odd.json"
    odd.write_text('{"studies": [{"protocolSection": {"identificationModule": "x"}}, '
                   '{"protocolSection": {"identificationModule": {"nctId": "NCT01234567", "briefTitle": "T"}, '
                   '"designModule": "x", "armsInterventionsModule": {"interventions": ["a", 3]}, '
                   '"contactsLocationsModule": {"locations": "x"}}}]}')
    report = import_ctgov_studies(odd, knowledge_db)
    assert report.inserted == 1 and report.skipped == {"missing or malformed NCT id": 1}


# -- PubMed ----------------------------------------------------------------------------------
def test_pubmed_import_parses_structured_abstracts_and_skips(server, knowledge_db):
    baseline = FIXTURES / "pubmed" / "pubmed24n0001-fixture.xml"
    report = import_pubmed_xml(baseline, knowledge_db)
    assert (report.inserted, report.updated) == (3, 1)  # 3 new, the ARISTOTLE demo paraphrase replaced
    assert report.skipped == {"missing or malformed PMID": 1, "book record (PubmedBookArticle) not supported": 1}
    again = import_pubmed_xml(baseline, knowledge_db)
    assert _counts(again) == (0, 0, 4, 0, report.skipped)
    result, _ = call("search_medical_literature", {"query": "zebrafibrate hypertriglyceridemia"})
    [article] = result["articles"]
    assert article["pmid"] == "99000001" and article["year"] == 2021 and article["demo_paraphrase"] is False
    assert article["title"] == "Fixture trial of zebrafibrate for hypertriglyceridemia in adults."
    db = connect(knowledge_db, read_only=True)
    row = next(db.query("SELECT * FROM articles WHERE pmid = '99000002'"))
    assert row["year"] == 1998 and row["keywords"] == "anticoagulation"
    abstract = next(db.query("SELECT abstract FROM articles WHERE pmid = '99000001'"))["abstract"]
    assert abstract.splitlines()[0] == "BACKGROUND: Hypertriglyceridemia raises pancreatitis risk."
    assert len(abstract.splitlines()) == 4


def test_pubmed_update_file_deletes_citations_and_gzip_is_read(tmp_path, knowledge_db):
    folder = tmp_path / "pubmed"
    folder.mkdir()
    for source in sorted((FIXTURES / "pubmed").glob("*.xml")):
        with gzip.open(folder / (source.name + ".gz"), "wb") as out:
            out.write(source.read_bytes())
    report = import_pubmed_xml(folder, knowledge_db)
    assert report.files == 2 and report.deleted == 1
    db = connect(knowledge_db, read_only=True)
    assert db.execute("SELECT COUNT(*) FROM articles WHERE pmid = '99000003'").fetchone()[0] == 0


# -- ClinicalTrials.gov ----------------------------------------------------------------------
def test_ctgov_import_single_study_and_page(server, knowledge_db):
    report = import_ctgov_studies(FIXTURES / "ctgov", knowledge_db)
    assert report.files == 2 and report.records == 5
    assert (report.inserted, report.updated) == (2, 1)  # NCT00042770 from the shipped sample is updated
    assert report.skipped == {
        "missing or malformed NCT id": 1,
        "not a ClinicalTrials.gov v2 study (no protocolSection)": 1,
    }
    assert _counts(import_ctgov_studies(FIXTURES / "ctgov", knowledge_db)) == (0, 0, 3, 0, report.skipped)
    details, _ = call("get_trial_details", {"nct_id": "NCT99000001"})
    assert details["minimum_age"] == "18 Years" and details["maximum_age"] == "75 Years" and details["sex"] == "ALL"
    assert details["phase"] == "Phase 2/Phase 3" and details["locations_total"] == 2
    assert details["locations"][0] == "Fixture Hospital, Boston, Massachusetts, United States"
    found, _ = call("find_clinical_trials", {"condition": "resistant hypertension", "status": "completed"})
    assert found["trials"][0]["nct_id"] == "NCT99000002"
    updated, _ = call("get_trial_details", {"nct_id": "NCT00042770"})
    assert updated["locations"] == ["Fixture Cancer Center, Rochester, Minnesota, United States"]


def test_ctgov_zip_of_study_files(tmp_path, knowledge_db):
    archive = tmp_path / "ctg-studies.json.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for source in (FIXTURES / "ctgov").glob("*.json"):
            zf.write(source, source.name)
    folder = tmp_path / "dl"
    folder.mkdir()
    shutil.move(archive, folder / archive.name)
    report = import_ctgov_studies(folder, knowledge_db)
    assert report.records == 5 and report.inserted == 2


def test_imports_survive_a_starter_content_reload(knowledge_db):
    import_openfda_labels(OPENFDA, knowledge_db)
    import_ctgov_studies(FIXTURES / "ctgov", knowledge_db)
    db = connect(knowledge_db)
    with db.conn:
        db.execute("DELETE FROM meta WHERE key = 'starter_hash'")
    db.close()
    from mcp_servers.knowledge.store import ensure_database

    ensure_database(knowledge_db)
    db = connect(knowledge_db, read_only=True)
    assert queries.drug_safety(db, "Lipitor")["source"].startswith("openFDA")
    assert trial_details(db, "NCT00042770")["locations_total"] == 1
