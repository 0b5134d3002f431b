"""The UMLS store: schema, shipped starter subset, anchors, search scoring and typo handling."""

from __future__ import annotations

import pytest

from common.sqlite import MIGRATIONS_TABLE
from mcp_servers.umls import foundation, lookup, store
from mcp_servers.umls import search as umls_search

# (term, CUI, SNOMED CT, RxNorm) - identifiers checked against UMLS / SNOMED CT / RxNorm.
ANCHORS = [
    ("acetaminophen", "C0000970", "387517004", "161"),
    ("hypertension", "C0020538", "38341003", None),
    ("type 2 diabetes mellitus", "C0011860", "44054006", None),
    ("myocardial infarction", "C0027051", "22298006", None),
    ("asthma", "C0004096", "195967001", None),
    ("atrial fibrillation", "C0004238", "49436004", None),
    ("warfarin", "C0043031", "372756006", "11289"),
    ("metformin", "C0025598", "372567009", "6809"),
    ("aspirin", "C0004057", "387458008", "1191"),
    ("heparin", "C0019134", "372877000", "5224"),
    ("osteoarthritis", "C0029408", "396275006", None),
    ("chronic kidney disease", "C1561643", "709044004", None),
    ("pregnancy", "C0032961", "77386006", None),
    ("amiodarone", "C0002598", "372821002", "703"),
    ("amoxicillin", "C0002645", "372687004", "723"),
    ("ibuprofen", "C0020740", "387207008", "5640"),
]


def test_blank_database_migrates_to_the_schema(tmp_path):
    db = foundation.connect(tmp_path / "blank.sqlite")
    assert foundation.migrate(db) == ["m001_initial"]
    assert foundation.migrate(db) == []
    tables = set(db.table_names())
    assert {"concepts", "atoms", "semtypes", "words", "word_deletes", "atoms_fts", "meta", MIGRATIONS_TABLE} <= tables
    assert "snomed_code" in db["concepts"].columns_dict and "rxnorm" in db["concepts"].columns_dict


def test_ensure_database_is_idempotent(tmp_path):
    path = tmp_path / "umls.sqlite"
    messages: list[str] = []
    store.ensure_database(path, messages.append)
    assert any("starter subset loaded" in m for m in messages)
    db = foundation.connect(path)
    before = db.execute("SELECT COUNT(*), MAX(id) FROM atoms").fetchone()
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    messages.clear()
    store.ensure_database(path, messages.append)
    assert messages == ["UMLS starter subset up to date"]
    db = foundation.connect(path)
    assert db.execute("SELECT COUNT(*), MAX(id) FROM atoms").fetchone() == before


def test_starter_subset_is_large_and_valid():
    concepts = store.read_starter()
    assert len(concepts) >= 300
    assert len({c["cui"] for c in concepts}) == len(concepts)
    drugs = [c for c in concepts if set(c["tuis"]) & set(foundation.DRUG_TUIS)]
    assert len(drugs) >= 100 and sum(1 for d in drugs if d["rxnorm"]) >= 100


def test_starter_validation_rejects_a_bad_cui(tmp_path):
    bad = tmp_path / "bad.tsv"
    header = "cui\tname\ttuis\tsnomed\trxnorm\tloinc\tsynonyms\tabbreviations\tbrands\n"
    bad.write_text(header + "X123\tThing\tT047\t\t\t\t\t\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad CUI"):
        store.read_starter(bad)


@pytest.mark.parametrize("cell,problem", [("", "unknown TUI"), ("T999", "unknown TUI"), ("-", None)])
def test_a_semantic_type_is_given_or_explicitly_not_recorded(tmp_path, cell, problem):
    path = tmp_path / "starter.tsv"
    header = "cui\tname\ttuis\tsnomed\trxnorm\tloinc\tsynonyms\tabbreviations\tbrands\n"
    path.write_text(header + f"C0023115\tLatex\t{cell}\t\t\t\t\t\t\n", encoding="utf-8")
    if problem:
        with pytest.raises(ValueError, match=problem):
            store.read_starter(path)
    else:
        assert store.read_starter(path)[0]["tuis"] == []


def test_a_concept_without_a_recorded_type_claims_none(db):
    # Latex's CUI is confirmed, its UMLS semantic type is not: no type is invented for it.
    best = umls_search.search(db, "latex", 1)[0]
    assert (best["cui"], best["semantic_type"], best["tui"]) == ("C0023115", None, None)
    assert lookup.semantic_types(db, "C0023115") == {"cui": "C0023115", "name": "Latex", "semantic_types": [],
                                                   "is_drug": False}


# Identifiers and types checked against public cTAKES output (PROVENANCE.md, the audit tables):
# (term, CUI, first semantic type) as UMLS's own dictionary lookup gave them.
AUDITED = [
    ("ranitidine", "C0034665", "T121"), ("cyanocobalamin", "C0042845", "T121"), ("ECG", "C1623258", "T060"),
    ("palpitations", "C0030252", "T033"), ("hyperkalemia", "C0020461", "T033"), ("body weight", "C0005910", "T032"),
    ("nitrofurantoin", "C0028156", "T121"), ("eGFR", "C3811844", "T059"), ("tiotropium", "C0213771", "T121"),
    ("carvedilol", "C0054836", "T121"), ("acute kidney injury", "C2609414", "T037"), ("sepsis", "C0243026", "T047"),
    ("pulmonary embolism", "C0034065", "T046"), ("hypotension", "C0020649", "T033"),
    ("ciprofloxacin", "C0008809", "T121"), ("hypokalemia", "C0020621", "T033"),
    ("azithromycin", "C0052796", "T195"), ("penicillin G", "C0030827", "T195"),
    ("clindamycin", "C0008947", "T195"), ("fluconazole", "C0016277", "T121"),
]


@pytest.mark.parametrize("term,cui,tui", AUDITED)
def test_audited_identifiers(db, term, cui, tui):
    best = umls_search.search(db, term, 1)[0]
    assert (best["cui"], best["tui"]) == (cui, tui)


def test_prednisone_is_also_a_hormone(db):
    types = [t["tui"] for t in lookup.semantic_types(db, "C0032952")["semantic_types"]]
    assert types == ["T121", "T125"]


def test_baclofen_is_not_basal_cell_nevus_syndrome(db):
    # second audit (PROVENANCE.md): C0004779, once held for baclofen, is Gorlin syndrome in public
    # data; the CHV file gives baclofen C0004609
    assert umls_search.search(db, "baclofen", 1)[0]["cui"] == "C0004609"
    with pytest.raises(foundation.ConceptNotFound):
        lookup.get_concept(db, "C0004779")


def test_urine_is_not_offered_as_urinalysis(db):
    # C0042036 is urine, the substance; the test's own CUI is not confirmed, so nothing is offered
    with pytest.raises(foundation.NoMatch):
        umls_search.search(db, "urinalysis", 1)


@pytest.mark.parametrize("term,cui,snomed,rxnorm", ANCHORS)
def test_anchor_concepts(db, term, cui, snomed, rxnorm):
    best = umls_search.search(db, term, 1)[0]
    assert (best["cui"], best["snomed_code"], best["rxnorm"]) == (cui, snomed, rxnorm)
    assert best["score"] == 1.0 or best["match_type"] == "synonym"


@pytest.mark.parametrize("term,cui", [
    ("Tylenol", "C0000970"), ("HTN", "C0020538"), ("MI", "C0027051"), ("T2DM", "C0011860"),
    ("COPD", "C0024117"), ("CKD", "C1561643"), ("AFib", "C0004238"), ("A-fib", "C0004238"),
    ("strep throat", "C0036689"), ("allergy to peanuts", "C0559470"), ("peanuts", "C0030736"),
    ("Coumadin", "C0043031"), ("Glucophage", "C0025598"), ("paracetamol", "C0000970"),
    ("heart attack", "C0027051"), ("HbA1c", "C0474680"),
])
def test_brands_abbreviations_and_synonyms_resolve(db, term, cui):
    best = umls_search.search(db, term, 5)[0]
    assert best["cui"] == cui
    assert best["score"] == 0.9 and best["match_type"] == "synonym"


@pytest.mark.parametrize("typo,cui", [
    ("hypertenson", "C0020538"), ("tylenl", "C0000970"), ("asthmaa", "C0004096"),
    ("atrial fibrilation", "C0004238"), ("metfromin", "C0025598"), ("warfrin", "C0043031"),
])
def test_one_typo_resolves_with_the_lowest_score_band(db, typo, cui):
    best = umls_search.search(db, typo, 5)[0]
    assert best["cui"] == cui
    assert best["match_type"] == "fuzzy" and best["score"] < 0.5


def test_score_bands_are_ordered(db):
    preferred = umls_search.search(db, "Hypertension", 1)[0]
    synonym = umls_search.search(db, "high blood pressure", 1)[0]
    prefix = umls_search.search(db, "hypertens", 1)[0]
    fuzzy = umls_search.search(db, "hypertenson", 1)[0]
    assert [r["cui"] for r in (preferred, synonym, prefix, fuzzy)] == ["C0020538"] * 4
    assert [r["match_type"] for r in (preferred, synonym, prefix, fuzzy)] == [
        "preferred_name", "synonym", "word", "fuzzy"]
    assert preferred["score"] == 1.0 > synonym["score"] == 0.9 > prefix["score"] >= 0.5 > fuzzy["score"]


def test_results_are_sorted_and_limited(db):
    results = umls_search.search(db, "diabetes", 4)
    assert len(results) == 4
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    # the exact name beats word matches: UMLS's broad "Diabetes" (C0011847), then the kinds of it
    assert results[0]["cui"] == "C0011847" and results[0]["score"] == 1.0
    assert "C0011849" in {r["cui"] for r in results[1:]}
    assert {"C0011860", "C0011854", "C0085207"} & {r["cui"] for r in results[1:]}


def test_a_name_that_begins_with_the_query_outranks_one_that_contains_it(db):
    # "Prediabetes" (synonym "Pre-diabetes") is shorter, so the query covers more of it; a
    # clinician typing "diabetes" still means diabetes mellitus before prediabetes.
    ranked = [r["cui"] for r in umls_search.search(db, "diabetes", 5)]
    assert ranked.index("C0011849") < ranked.index("C0362046")
    word = [r for r in umls_search.search(db, "diabetes", 10) if r["match_type"] == "word"]
    assert word and all(0.5 <= r["score"] <= 0.875 for r in word)


def test_word_matches_are_graded_by_coverage(db):
    results = {r["cui"]: r["score"] for r in umls_search.search(db, "heart failure", 5)}
    assert results["C0018801"] == 1.0
    assert results["C0018802"] < 1.0  # congestive heart failure: word match, lower


def test_search_takes_a_connection_or_a_path(db, starter_db):
    assert umls_search.search(starter_db, "HTN", 3) == umls_search.search(db, "HTN", 3)
    assert umls_search.search(str(starter_db), "Tylenol", 1)[0]["cui"] == "C0000970"


def test_empty_and_unknown_terms(db):
    with pytest.raises(foundation.InvalidQuery):
        umls_search.search(db, "  ?! ")
    with pytest.raises(foundation.NoMatch):
        umls_search.search(db, "qqzzxxvv")


def test_within_one_edit():
    assert umls_search.within_one_edit("warfarin", "warfrin")
    assert umls_search.within_one_edit("warfarin", "wrafarin")  # adjacent swap
    assert umls_search.within_one_edit("asthma", "asthmx")
    assert not umls_search.within_one_edit("asthma", "astmx")
    assert not umls_search.within_one_edit("heparin", "aspirin")


def test_concept_details_and_semantic_types(db):
    concept = lookup.get_concept(db, "c0000970")
    assert concept["codes"] == {"snomed_code": "387517004", "rxnorm": "161", "loinc": None}
    names = {s["name"]: s["term_type"] for s in concept["synonyms"]}
    assert names["Tylenol"] == "BN" and names["APAP"] == "AB" and names["Paracetamol"] == "SY"
    types = lookup.semantic_types(db, "C0020538")
    assert types["semantic_types"] == [{"tui": "T047", "name": "Disease or Syndrome"}]
    assert types["is_drug"] is False
    with pytest.raises(foundation.ConceptNotFound):
        lookup.get_concept(db, "C0000001")
    with pytest.raises(foundation.InvalidQuery):
        lookup.get_concept(db, "hypertension")


def test_drug_names_hold_generics_brands_and_synonyms_only(db):
    names = lookup.drug_names(db)
    assert names == sorted(names, key=str.casefold)
    for name in ("Acetaminophen", "Tylenol", "Paracetamol", "Warfarin", "Coumadin", "Metformin", "Amoxicillin"):
        assert name in names
    assert "Hypertension" not in names and "Asthma" not in names
