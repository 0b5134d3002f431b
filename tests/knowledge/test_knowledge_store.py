"""Schema, migrations, ensure_database idempotency and the shipped starter content."""

from __future__ import annotations

import json
import re
import sqlite3

from common.sqlite import MIGRATIONS_TABLE, applied_migrations
from mcp_servers.knowledge import migrations, store, writes
from mcp_servers.knowledge.names import display_name, lookup_keys, name_key, strip_salt
from mcp_servers.knowledge.store import connect, ensure_database

# Drugs the brief requires, and whether each carries a boxed warning in its US label.
REQUIRED_BOXED = {
    "dofetilide": True, "amiodarone": True, "warfarin": True, "metformin": True, "amoxicillin": False,
    "penicillin": False, "aspirin": False, "ibuprofen": True, "naproxen": True, "acetaminophen": False,
    "lisinopril": True, "atorvastatin": False, "simvastatin": False, "amlodipine": False,
    "clopidogrel": True, "digoxin": False, "levothyroxine": True, "sertraline": True, "fluoxetine": True,
    "prednisone": False, "insulin glargine": False, "apixaban": True, "ciprofloxacin": True,
    "clarithromycin": False, "fluconazole": False, "spironolactone": False, "furosemide": True,
    "methotrexate": True, "tramadol": True, "oxycodone": True,
}
REQUIRED_PAIRS = [
    ("warfarin", "aspirin"), ("warfarin", "ibuprofen"), ("aspirin", "ibuprofen"), ("warfarin", "amiodarone"),
    ("warfarin", "fluconazole"), ("warfarin", "ciprofloxacin"), ("simvastatin", "clarithromycin"),
    ("simvastatin", "amiodarone"), ("digoxin", "amiodarone"), ("lisinopril", "spironolactone"),
    ("clopidogrel", "omeprazole"),
]


def dump(path) -> dict:
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE '%fts%'")]
    return {t: sorted(map(repr, conn.execute(f"SELECT * FROM [{t}]"))) for t in tables}


def test_blank_database_migrates_to_expected_schema(tmp_path):
    db = connect(tmp_path / "blank.sqlite")
    assert store.migrate(db) == ["m001_initial", "m002_trial_search", "m003_trial_filters"]
    assert store.migrate(db) == []
    tables = set(db.table_names())
    assert {"drugs", "drug_names", "interactions", "articles", "trials", "meta", MIGRATIONS_TABLE} <= tables
    assert {"articles_fts", "trials_fts", "trials_eligibility_fts", "trial_filters"} <= tables
    assert set(db["interactions"].pks) == {"drug_a", "drug_b"}
    assert db["trials"].columns_dict.keys() >= {"eligibility_criteria", "minimum_age", "maximum_age", "sex", "demo", "locations",
                                                "min_age_years", "max_age_years", "arms"}


def test_m002_fills_the_ages_in_years_and_indexes_the_criteria_of_existing_trials(tmp_path):
    db = connect(tmp_path / "old.sqlite")
    migrations.m001_initial(db)
    db["trials"].insert({"nct_id": "NCT00000001", "title": "Old row", "minimum_age": "6 Months", "maximum_age": "17 Years",
                         "eligibility_criteria": "Inclusion Criteria:\n* Asthma", "origin": "import"})
    migrations.m002_trial_search(db)
    row = next(db.query("SELECT min_age_years, max_age_years FROM trials"))
    assert row == {"min_age_years": 0.5, "max_age_years": 17.0}
    hits = db.execute("SELECT rowid FROM trials_eligibility_fts WHERE trials_eligibility_fts MATCH 'asthma'").fetchall()
    assert len(hits) == 1
    db.execute("UPDATE trials SET eligibility_criteria = 'Inclusion Criteria:\n* Eczema'")  # kept by the triggers
    assert not db.execute("SELECT 1 FROM trials_eligibility_fts WHERE trials_eligibility_fts MATCH 'asthma'").fetchall()
    assert db.execute("SELECT 1 FROM trials_eligibility_fts WHERE trials_eligibility_fts MATCH 'eczema'").fetchall()


def test_ensure_database_is_idempotent_and_uses_wal(tmp_path):
    path = tmp_path / "k.sqlite"
    messages: list[str] = []
    ensure_database(path, progress=messages.append)
    assert any("starter content loaded" in m for m in messages)
    first = dump(path)
    messages.clear()
    ensure_database(path, progress=messages.append)
    assert messages == ["starter content up to date"]
    assert dump(path) == first
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_starter_reload_rewrites_nothing_when_content_is_unchanged(knowledge_db):
    before = dump(knowledge_db)
    db = connect(knowledge_db)
    with db.conn:
        db.execute("DELETE FROM meta WHERE key = 'starter_hash'")  # force a reload
    db.close()
    ensure_database(knowledge_db)
    assert dump(knowledge_db) == {**before, "meta": dump(knowledge_db)["meta"]}


def test_required_drugs_are_present_with_their_boxed_warning_status(knowledge_db):
    db = connect(knowledge_db, read_only=True)
    rows = {r["generic_name"]: r for r in db.query("SELECT * FROM drugs")}
    for generic, boxed in REQUIRED_BOXED.items():
        assert generic in rows, generic
        assert bool(rows[generic]["boxed_warning"]) is boxed, generic
        assert rows[generic]["demo"] == 1 and "verify against the current label" in rows[generic]["source"]
        assert json.loads(rows[generic]["contraindications"]), generic
    assert "creatinine clearance" in rows["dofetilide"]["boxed_warning"]
    assert "3 days" in rows["dofetilide"]["boxed_warning"]
    assert "CYP2C19" in rows["clopidogrel"]["boxed_warning"]
    assert "weight loss" in rows["levothyroxine"]["boxed_warning"]
    assert any("eGFR below 30" in c for c in json.loads(rows["metformin"]["contraindications"]))


def test_required_interactions_exist_and_pairs_are_stored_once_in_order(knowledge_db):
    db = connect(knowledge_db, read_only=True)
    pairs = {(r[0], r[1]): r[2] for r in db.execute("SELECT drug_a, drug_b, severity FROM interactions")}
    assert all(a < b for a, b in pairs)
    assert all(severity in writes.SEVERITIES for severity in pairs.values())
    for a, b in REQUIRED_PAIRS:
        assert tuple(sorted((a, b))) in pairs, (a, b)
    assert pairs[("clarithromycin", "simvastatin")] == "contraindicated"
    generics = {r[0] for r in db.execute("SELECT generic_name FROM drugs")}
    assert {name for pair in pairs for name in pair} <= generics


def test_starter_articles_and_trials_are_labelled(knowledge_db):
    db = connect(knowledge_db, read_only=True)
    articles = list(db.query("SELECT * FROM articles"))
    assert len(articles) >= 20
    assert all(a["pmid"].isdigit() and a["demo"] == 1 and "paraphrase" in a["source"] for a in articles)
    trials = list(db.query("SELECT * FROM trials"))
    demo = [t for t in trials if t["demo"]]
    real = [t for t in trials if not t["demo"]]
    assert len(demo) >= 8 and all(re.fullmatch(r"NCT-DEMO-\d{4}", t["nct_id"]) for t in demo)
    assert all(t["title"].startswith("DEMO:") for t in demo)
    assert len(real) == 126 and all(re.fullmatch(r"NCT\d{8}", t["nct_id"]) for t in real)
    assert all("ClinicalTrials.gov" in t["source"] for t in real)
    assert sum(1 for t in real if t["eligibility_criteria"]) == 12


def test_name_normalisation():
    assert name_key(" Tylenol® ") == "tylenol"
    assert name_key("EC-Naprosyn") == "ec naprosyn"
    assert strip_salt("warfarin sodium") == "warfarin"
    assert strip_salt("magnesium sulfate") == "magnesium sulfate"
    assert lookup_keys("Metformin HCl 500 mg tablets") == ["metformin hcl 500 mg tablets", "metformin hcl", "metformin"]
    assert display_name("TOPROL-XL") == "Toprol-XL"
    assert display_name("MOTRIN IB") == "Motrin IB"


def test_a_database_made_before_common_sqlite_is_not_migrated_again(tmp_path):
    # The legacy record format of the rebuildable stores: _migrations (name PRIMARY KEY, applied_at TEXT).
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    old.execute("INSERT INTO _migrations VALUES ('m001_initial', '2026-01-02T03:04:05+00:00')")
    old.commit()
    old.close()
    db = connect(path)
    migrations.m001_initial(db)  # the schema that record stands for
    db.close()
    ensure_database(path)
    db = connect(path, read_only=True)
    assert applied_migrations(db, migrations.STORE) == ["m001_initial", "m002_trial_search", "m003_trial_filters"]  # m001 once
    assert "_migrations" not in db.table_names()
    assert db["drugs"].count >= 30


def test_m003_keeps_a_narrow_copy_of_the_filtered_columns(tmp_path):
    path = tmp_path / "k.sqlite"
    ensure_database(path)
    db = connect(path)

    def filters():
        return {r[0]: r[1:] for r in db.execute(
            "SELECT t.nct_id, f.status, f.sex, f.min_age_years FROM trial_filters f JOIN trials t ON t.rowid = f.rowid")}

    assert len(filters()) == db["trials"].count
    writes.upsert_trial(db, {"nct_id": "NCT00000009", "title": "New", "status": "RECRUITING", "sex": "Female",
                            "minimum_age": "18 Years", "source": "test"}, "import")
    assert filters()["NCT00000009"] == ("RECRUITING", "FEMALE", 18.0)
    writes.upsert_trial(db, {"nct_id": "NCT00000009", "title": "New", "status": "COMPLETED", "sex": "ALL",
                            "minimum_age": "6 Months", "source": "test"}, "import")
    assert filters()["NCT00000009"] == ("COMPLETED", "ALL", 0.5)
    db.execute("DELETE FROM trials WHERE nct_id = 'NCT00000009'")
    assert "NCT00000009" not in filters() and len(filters()) == db["trials"].count
