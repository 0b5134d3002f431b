"""Databases built before a demo-data or code-catalog fix get the corrected demo rows."""

from __future__ import annotations

import sqlite3

from ehr_helpers import audit_rows, row_counts

from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database


def _one(path, sql, args=()):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, args).fetchone()
    finally:
        conn.close()


def _execute(path, sql, args=()):
    conn = sqlite3.connect(path)
    try:
        conn.execute(sql, args)
        conn.commit()
    finally:
        conn.close()


def _age_the_database(path):
    """Put back what the demo rows held before the fixes (wrong codes, wrong frequency)."""
    _execute(path, "UPDATE medication_requests SET rxnorm_code = '6902' WHERE medication_name LIKE 'Methylphenidate%'")
    _execute(path, "UPDATE allergy_intolerances SET substance_code = '10831' WHERE substance = 'Sulfamethoxazole'")
    _execute(path, "UPDATE medication_requests SET frequency = 'twice daily' WHERE medication_name = 'Metoprolol succinate'")
    _execute(path, "DELETE FROM observations WHERE id = 'abc-123-obs-1'")


def test_old_demo_rows_are_refreshed_and_nothing_else_changes(tmp_path):
    path = tmp_path / "ehr.sqlite"
    ensure_database(path)
    repo = EhrRepository(path)
    # A clinician's own records, including one that would also match the refresh's WHERE clauses.
    repo.prescribe_medication("abc-123", "Methylphenidate", "5 mg", "once daily", None, author="dr.keep")
    _execute(path, "UPDATE medication_requests SET rxnorm_code = '6902' WHERE author = 'dr.keep'")
    _age_the_database(path)
    before = row_counts(path)

    messages: list[str] = []
    ensure_database(path, messages.append)

    assert _one(path, "SELECT rxnorm_code FROM medication_requests WHERE medication_name LIKE 'Methylphenidate ext%'") == ("6901",)
    assert _one(path, "SELECT substance_code FROM allergy_intolerances WHERE substance = 'Sulfamethoxazole'") == ("10180",)
    assert _one(path, "SELECT frequency FROM medication_requests WHERE medication_name = 'Metoprolol succinate'") == ("once daily",)
    assert _one(path, "SELECT loinc_code FROM observations WHERE id = 'abc-123-obs-1'") == ("4548-4",)
    # The clinician's order is not demo data: left exactly as written.
    assert _one(path, "SELECT rxnorm_code, dosage FROM medication_requests WHERE author = 'dr.keep'") == ("6902", "5 mg")
    after = row_counts(path)
    assert after["observations"] == before["observations"] + 1
    assert after["audit_log"] == before["audit_log"] + 1
    assert audit_rows(path)[-1]["tool"] == "refresh_demo_patients"
    assert any("3 updated, 1 added" in m for m in messages), messages

    ensure_database(path, messages.append)
    assert row_counts(path) == after
    assert messages[-1] == "demo patients present"


def test_a_non_demo_patient_sharing_a_demo_id_is_left_alone(tmp_path):
    path = tmp_path / "ehr.sqlite"
    ensure_database(path)
    _execute(path, "UPDATE patients SET source = 'fhir', given = 'Imported' WHERE id = 'pat-001'")
    _execute(path, "UPDATE medication_requests SET source = 'fhir', frequency = 'weekly' WHERE id = 'pat-001-med-1'")
    ensure_database(path)
    assert _one(path, "SELECT given FROM patients WHERE id = 'pat-001'") == ("Imported",)
    assert _one(path, "SELECT frequency FROM medication_requests WHERE id = 'pat-001-med-1'") == ("weekly",)
