"""Migrating a blank database yields the FHIR-aligned schema; migrating again is a no-op."""

from __future__ import annotations

import sqlite3

import pytest
from sqlite_utils import Database

from common.sqlite import MIGRATIONS_TABLE, connect
from ehr_db.migrations import MIGRATIONS, applied_migrations, migrate
from ehr_db.repository import audit

EXPECTED_COLUMNS = {
    "patients": {"id", "mrn", "family", "given", "name_key", "birth_date", "sex", "deceased_date",
                 "source", "updated_at"},
    "encounters": {"id", "patient_id", "status", "class_code", "period_start", "period_end"},
    "conditions": {"id", "patient_id", "snomed_code", "display", "clinical_status", "onset_date"},
    "medication_requests": {"id", "patient_id", "rxnorm_code", "medication_name", "dosage", "frequency",
                            "status", "notes", "author", "authored_at"},
    "allergy_intolerances": {"id", "patient_id", "substance", "substance_code", "reaction", "severity",
                             "author", "recorded_at"},
    "observations": {"id", "patient_id", "loinc_code", "display", "value_num", "value_text", "unit",
                     "ref_low", "ref_high", "interpretation", "category", "effective_at"},
    "document_references": {"id", "patient_id", "note_type", "text", "author", "created_at"},
    "audit_log": {"id", "at", "actor", "tool", "arguments", "result", "outcome", "seq", "prev_hash", "row_hash"},
    "audit_head": {"id", "seq", "hash"},
    "row_digests": {"seq", "tbl", "row_id", "before", "digest"},
}


@pytest.fixture
def blank(tmp_path):
    db = connect(tmp_path / "blank.sqlite")
    yield db
    db.close()


def test_migrate_blank_database_creates_schema(blank: Database):
    applied = migrate(blank)
    assert applied == [fn.__name__ for fn in MIGRATIONS]
    assert set(EXPECTED_COLUMNS) | {MIGRATIONS_TABLE} <= set(blank.table_names())
    for table, columns in EXPECTED_COLUMNS.items():
        assert columns <= set(blank[table].columns_dict), table
    assert blank["patients"].pks == ["id"]
    assert blank.journal_mode == "wal"


def test_migrate_twice_is_a_no_op(blank: Database):
    migrate(blank)
    schema = blank.schema
    recorded = list(blank[MIGRATIONS_TABLE].rows)
    assert migrate(blank) == []
    assert blank.schema == schema
    assert list(blank[MIGRATIONS_TABLE].rows) == recorded
    assert applied_migrations(blank) == [fn.__name__ for fn in MIGRATIONS]


def test_a_database_made_before_common_sqlite_keeps_its_migrations(tmp_path):
    # The EHR's legacy record format: _migrations (name PRIMARY KEY, applied_at TEXT NOT NULL).
    old = Database(sqlite3.connect(tmp_path / "old.sqlite"))
    old.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for fn in MIGRATIONS[:2]:
        fn(old)
        old.execute("INSERT INTO _migrations VALUES (?, ?)", [fn.__name__, "2026-01-02T03:04:05+00:00"])
    old.close()
    db = connect(tmp_path / "old.sqlite")
    assert migrate(db) == [fn.__name__ for fn in MIGRATIONS[2:]]
    assert applied_migrations(db) == [fn.__name__ for fn in MIGRATIONS]
    assert "_migrations" not in db.table_names()
    assert [r["applied_at"] for r in db[MIGRATIONS_TABLE].rows][:2] == ["2026-01-02T03:04:05+00:00"] * 2
    db.close()


def test_migration_names_are_unique_and_ordered():
    names = [fn.__name__ for fn in MIGRATIONS]
    assert len(set(names)) == len(names)
    assert names == sorted(names)


@pytest.mark.parametrize(
    "table,row,message",
    [
        ("allergy_intolerances", {"severity": "extreme"}, "CHECK"),
        ("observations", {"interpretation": "X"}, "CHECK"),
        ("observations", {"category": "survey"}, "CHECK"),
    ],
)
def test_check_constraints_reject_unknown_values(blank: Database, table, row, message):
    migrate(blank)
    blank["patients"].insert({"id": "abc-001", "family": "F", "given": "G", "name_key": " g f ",
                              "source": "demo", "updated_at": "2026-01-01"})
    base = {
        "allergy_intolerances": {"id": "a1", "patient_id": "abc-001", "substance": "x", "recorded_at": "2026",
                                 "source": "demo"},
        "observations": {"id": "o1", "patient_id": "abc-001", "display": "x", "value_num": 1.0,
                         "category": "laboratory", "effective_at": "2026", "source": "demo"},
    }[table]
    with pytest.raises(sqlite3.IntegrityError, match=message):
        blank[table].insert({**base, **row})


def test_foreign_key_requires_existing_patient(blank: Database):
    migrate(blank)
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        blank["conditions"].insert({"id": "c1", "patient_id": "nobody", "display": "x",
                                    "clinical_status": "active", "source": "demo"})


@pytest.mark.parametrize("statement,message", [
    ("UPDATE audit_log SET actor = 'x'", "append-only"),
    ("DELETE FROM audit_log", "append-only"),
    ("UPDATE audit_head SET seq = 0", "only follows"),
    ("DELETE FROM audit_head", "cannot be deleted"),
])
def test_audit_log_is_append_only(blank: Database, statement, message):
    migrate(blank)
    audit(blank, "a", "t", {}, None)
    with pytest.raises(sqlite3.IntegrityError, match=message):
        blank.execute(statement)
    assert blank["audit_log"].count == 1


def test_a_row_that_does_not_extend_the_chain_is_refused(blank: Database):
    migrate(blank)
    with pytest.raises(sqlite3.IntegrityError, match="extend the hash chain"):
        blank["audit_log"].insert({"at": "2026", "actor": "a", "tool": "t", "arguments": "{}", "outcome": "success"})
    assert blank["audit_log"].count == 0
