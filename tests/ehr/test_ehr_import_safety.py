"""Imports never quietly change what clinicians rely on: each case, on
the demo record. An identity, allergy or active-medication change stops the import before
anything is written and lists each difference; ``accept_changes`` applies them, audited with
before and after. Duplicate ids, impossible values and files that cannot be read in full are
refused whole."""

from __future__ import annotations

import json
import sqlite3

import pytest
from ehr_helpers import audit_rows, row_counts

from ehr_db.errors import BundleError, ImportNeedsAcceptance
from ehr_db.fhir_import import import_fhir_bundle
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database

POLLEN = {"resourceType": "AllergyIntolerance", "id": "pat-006-alg-1", "patient": {"reference": "Patient/pat-006"},
          "code": {"text": "Pollen"}, "category": ["environment"], "recordedDate": "2026-01-01",
          "reaction": [{"manifestation": [{"text": "Sneezing"}], "severity": "mild"}]}
NOT_JOHN = {"resourceType": "Patient", "id": "abc-123", "name": [{"family": "Doe", "given": ["Jane"]}],
            "gender": "female", "birthDate": "1990-01-01"}


def hba1c(value, rid: str = "obs-a1c-1", unit: str = "%") -> dict:
    return {"resourceType": "Observation", "id": rid, "status": "final", "subject": {"reference": "Patient/abc-123"},
            "category": [{"coding": [{"code": "laboratory"}]}], "effectiveDateTime": "2026-02-01",
            "code": {"coding": [{"system": "http://loinc.org", "code": "4548-4", "display": "Hemoglobin A1c"}]},
            "valueQuantity": {"value": value, "unit": unit}}


def bundle(tmp_path, *resources, name: str = "b.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"resourceType": "Bundle", "type": "collection",
                                "entry": [{"resource": r} for r in resources]}))
    return path


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "ehr.sqlite"
    ensure_database(path)
    return path


def snapshot(path) -> tuple:
    conn = sqlite3.connect(path)
    try:
        tables = {t: conn.execute(f"SELECT * FROM {t} ORDER BY id").fetchall()
                  for t in ("patients", "allergy_intolerances", "medication_requests", "observations")}
    finally:
        conn.close()
    return tables, len(audit_rows(path))


def test_an_allergy_replaced_by_another_stops_and_lists_each_difference(db, tmp_path):
    before = snapshot(db)
    with pytest.raises(ImportNeedsAcceptance) as stopped:
        import_fhir_bundle(db, bundle(tmp_path, POLLEN))
    assert "nothing was imported" in str(stopped.value) and "--accept-changes" in str(stopped.value)
    found = {(d.row_id, d.field): (d.before, d.after) for d in stopped.value.differences}
    assert found[("pat-006-alg-1", "substance")] == ("Penicillin", "Pollen")
    assert found[("pat-006-alg-1", "severity")] == ("severe", "mild")
    assert ("pat-006-alg-1", "reaction") in found
    assert stopped.value.differences[0].describe().startswith("patient pat-006: allergy_intolerances pat-006-alg-1: ")
    assert snapshot(db) == before  # nothing written, not even an audit row


def test_accepted_changes_are_applied_and_audited_with_before_and_after(db, tmp_path):
    report = import_fhir_bundle(db, bundle(tmp_path, POLLEN, NOT_JOHN), accept_changes=True)
    assert dict(report.updated) == {"patients": 1, "allergy_intolerances": 1}
    assert "accepted 7 change(s)" in report.summary() and "'Penicillin' -> 'Pollen'" in report.summary()
    row = audit_rows(db)[-1]
    accepted = json.loads(row["arguments"])["accepted_changes"]
    assert {(c["row_id"], c["field"], c["before"], c["after"]) for c in accepted} >= {
        ("pat-006-alg-1", "substance", "Penicillin", "Pollen"), ("abc-123", "given", "John", "Jane"),
        ("abc-123", "birth_date", "1958-03-14", "1990-01-01"), ("abc-123", "sex", "male", "female")}
    assert EhrRepository(db).verify_audit().ok


def test_a_patients_identity_is_not_replaced_quietly(db, tmp_path):
    before = snapshot(db)
    with pytest.raises(ImportNeedsAcceptance) as stopped:
        import_fhir_bundle(db, bundle(tmp_path, NOT_JOHN))
    assert {d.field for d in stopped.value.differences} == {"given", "family", "sex", "birth_date"}
    assert snapshot(db) == before
    assert EhrRepository(db).get_patient_chart("abc-123")["patient"]["name"] == "John Smith"


@pytest.mark.parametrize("change,fields", [
    ({"reaction": [{"manifestation": [{"text": "Anaphylaxis"}], "severity": "mild"}]}, {"severity"}),
    ({"clinicalStatus": {"coding": [{"code": "resolved"}]}}, {"clinical_status"}),
    ({"patient": {"reference": "Patient/abc-123"}}, {"patient_id"}),
    ({"recordedDate": "2010-01-01", "category": ["food"]}, set()),
], ids=["downgraded", "removed", "moved-to-another-patient", "other-columns-are-fine"])
def test_an_allergy_downgraded_or_removed_stops(db, tmp_path, change, fields):
    current = sqlite3.connect(db).execute("SELECT reaction FROM allergy_intolerances WHERE id = 'pat-006-alg-1'"
                                          ).fetchone()[0]
    resource = {**POLLEN, "code": {"text": "Penicillin"},
                "reaction": [{"manifestation": [{"text": current}], "severity": "severe"}], **change}
    if fields:
        with pytest.raises(ImportNeedsAcceptance) as stopped:
            import_fhir_bundle(db, bundle(tmp_path, resource))
        assert {d.field for d in stopped.value.differences} >= fields
    else:
        import_fhir_bundle(db, bundle(tmp_path, resource))  # other columns may change quietly


def test_an_active_medication_changed_stops(db, tmp_path):
    warfarin = {"resourceType": "MedicationRequest", "id": "pat-005-med-1", "status": "active", "intent": "order",
                "subject": {"reference": "Patient/pat-005"}, "authoredOn": "2026-01-01",
                "medicationCodeableConcept": {"text": "Warfarin"},
                "dosageInstruction": [{"doseAndRate": [{"doseQuantity": {"value": 50, "unit": "mg"}}]}]}
    with pytest.raises(ImportNeedsAcceptance) as stopped:
        import_fhir_bundle(db, bundle(tmp_path, warfarin))
    assert any(d.field == "dosage" and d.after == "50 mg" for d in stopped.value.differences)


def test_a_duplicate_id_inside_one_file_is_refused(db, tmp_path):
    before = snapshot(db)
    first = {**POLLEN, "id": "new-allergy-1", "patient": {"reference": "Patient/abc-123"}}
    second = {**first, "code": {"text": "Latex"}}
    with pytest.raises(BundleError, match="holds AllergyIntolerance new-allergy-1 twice \\(entries 1 and 2\\)"):
        import_fhir_bundle(db, bundle(tmp_path, first, second))
    assert snapshot(db) == before


@pytest.mark.parametrize("value,words", [
    (1e30, "valueQuantity.value is outside physiological limits for LOINC 4548-4 \\(2-25 %\\)"),
    (55, "valueQuantity.value is outside physiological limits for LOINC 4548-4 \\(2-25 %\\)"),
    (float("nan"), "valueQuantity.value is not a finite number"),
])
def test_an_impossible_value_is_refused_with_the_field_named(db, tmp_path, value, words):
    before = snapshot(db)
    with pytest.raises(BundleError, match=f"Observation obs-a1c-1: {words}; nothing was imported"):
        import_fhir_bundle(db, bundle(tmp_path, hba1c(6.1, "obs-ok"), hba1c(value)))
    assert snapshot(db) == before  # the good observation before it was not kept either


def test_a_plausible_value_in_another_unit_is_not_held_to_the_percent_limits(db, tmp_path):
    report = import_fhir_bundle(db, bundle(tmp_path, hba1c(48, unit="mmol/mol")))
    assert dict(report.created) == {"observations": 1}


@pytest.mark.parametrize("content,words", [
    ('{"resourceType": "Bundle", "type": "collection", "entry": [{"resource": {"resourceType": "Pat',
     "is not valid JSON .*truncated or damaged; nothing was imported"),
    ('{"resourceType": "Bundle", "type": "collection", "entry": [' + "[" * 100_000 + "]" * 100_000 + "]}",
     "nested too deeply to read; nothing was imported"),
    (b"\xff\xfe not text", "cannot read b.json in full: not UTF-8 text"),
], ids=["truncated", "nested-100000-deep", "not-utf8"])
def test_a_bundle_that_cannot_be_read_in_full_imports_nothing(db, tmp_path, content, words):
    path = tmp_path / "b.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = row_counts(db)
    with pytest.raises(BundleError, match=words):
        import_fhir_bundle(db, path)
    assert row_counts(db) == before
