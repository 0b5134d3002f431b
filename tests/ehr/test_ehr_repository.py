"""Repository reads and writes against a real database loaded with the demo patients."""

from __future__ import annotations

import json
from datetime import date

import pytest
from ehr_helpers import audit_rows, row_claim, row_counts

from ehr_db.errors import DatabaseNotReady, InvalidField, PatientNotFound
from ehr_db.repository import EhrRepository, fold


@pytest.mark.parametrize("query", ["Maria Garcia", "garcia", "Garcia, Maria", "MARIA GARCIA", "  maria   garcia "])
def test_search_finds_maria_garcia_in_any_form(repo, query):
    result = repo.search_patient(query)
    assert result["total_matches"] == 1
    match = result["matches"][0]
    assert match == {"patient_id": "pat-001", "name": "Maria Garcia", "birth_date": "1971-08-22",
                     "sex": "female", "mrn": "DEMO-000201"}


def test_search_returns_three_james_wilsons_with_distinct_birth_dates(repo):
    result = repo.search_patient("James Wilson")
    assert result["total_matches"] == 3
    assert {m["name"] for m in result["matches"]} == {"James Wilson"}
    assert len({m["birth_date"] for m in result["matches"]}) == 3


def test_search_matches_word_starts_not_inner_letters(repo):
    assert repo.search_patient("gar")["total_matches"] == 1
    assert repo.search_patient("arcia")["total_matches"] == 0


def test_search_without_match(repo):
    assert repo.search_patient("Nobody Atall") == {"matches": [], "total_matches": 0, "closest": []}


def test_search_limit_keeps_the_total(repo):
    result = repo.search_patient("james", limit=2)
    assert len(result["matches"]) == 2
    assert result["total_matches"] == 3


@pytest.mark.parametrize("query", ["", "   ", "!!!"])
def test_search_rejects_empty_names(repo, query):
    with pytest.raises(InvalidField, match="name"):
        repo.search_patient(query)


def test_fold_removes_accents_and_punctuation():
    assert fold("  Pérez-García, MARÍA ") == "perez garcia maria"


def test_chart_of_john_smith(repo):
    chart = repo.get_patient_chart("abc-123", today=date(2026, 11, 1))
    assert chart["patient"]["name"] == "John Smith"
    assert chart["patient"]["age"] == 68
    assert chart["synthetic_demo_record"] is True
    problems = {p["snomed_code"] for p in chart["active_problems"]}
    assert {"44054006", "433144002"} <= problems
    metformin = [m for m in chart["medications"] if m["medication_name"] == "Metformin"]
    assert metformin and metformin[0]["rxnorm_code"] == "6809" and metformin[0]["dosage"] == "500 mg"
    egfr = next(lab for lab in chart["labs"] if lab["loinc_code"] == "33914-3")
    assert (egfr["value"], egfr["flag"], egfr["reference_range"]) == (42, "L", ">=60")
    assert egfr["previous"] == {"value": 46, "effective_at": "2026-03-12"}
    hba1c = next(lab for lab in chart["labs"] if lab["loinc_code"] == "4548-4")
    assert (hba1c["unit"], hba1c["flag"]) == ("%", "H")
    systolic = next(v for v in chart["vitals"] if v["loinc_code"] == "8480-6")
    assert (systolic["value"], systolic["unit"]) == (142, "mmHg")
    assert chart["recent_notes"][0]["note_type"] == "progress"


def test_chart_hides_inactive_problems_and_stopped_medications(repo):
    chart = repo.get_patient_chart("pat-015")
    assert "Metformin" not in {m["medication_name"] for m in chart["medications"]}
    chart = repo.get_patient_chart("pat-006")
    assert "43878008" not in {p["snomed_code"] for p in chart["active_problems"]}
    assert chart["allergies"][0]["substance"] == "Penicillin"


def test_chart_of_unknown_patient(repo):
    with pytest.raises(PatientNotFound):
        repo.get_patient_chart("zzz-999")


def test_missing_database_file(tmp_path):
    with pytest.raises(DatabaseNotReady):
        EhrRepository(tmp_path / "absent.sqlite").search_patient("x")
    assert not (tmp_path / "absent.sqlite").exists()


def test_prescribe_writes_record_and_audit_row_together(repo, ehr_path):
    before = row_counts(ehr_path)
    new_id = repo.prescribe_medication("abc-123", " Metformin ", "500 mg", "BID", None, author="dr.test")
    after = row_counts(ehr_path)
    assert after["medication_requests"] == before["medication_requests"] + 1
    assert after["audit_log"] == before["audit_log"] + 1
    chart = repo.get_patient_chart("abc-123")
    order = next(m for m in chart["medications"] if m["id"] == new_id)
    assert order["medication_name"] == "Metformin"
    assert order["rxnorm_code"] == "6809"
    assert order["author"] == "dr.test" and order["status"] == "active"
    last = audit_rows(ehr_path)[-1]
    assert (last["actor"], last["tool"], last["outcome"]) == ("dr.test", "prescribe_medication", "success")
    # the digest of the row it wrote, under the chain (``ehr_db.custody``)
    assert json.loads(last["result"]) == {"id": new_id, "rows": row_claim(ehr_path, "medication_requests", new_id)}
    assert json.loads(last["arguments"])["patient_id"] == "abc-123"


def test_add_allergy_and_note(repo, ehr_path):
    allergy_id = repo.add_allergy("pat-001", "Latex", "Contact dermatitis", "mild", author="dr.test")
    note_id = repo.save_clinical_note("pat-001", "telephone", "Called about results.", author="dr.test")
    chart = repo.get_patient_chart("pat-001")
    assert any(a["substance"] == "Latex" and a["severity"] == "mild" for a in chart["allergies"])
    assert chart["recent_notes"][0]["id"] == note_id
    assert chart["recent_notes"][0]["author"] == "dr.test"
    assert [r["tool"] for r in audit_rows(ehr_path)[-2:]] == ["add_allergy", "save_clinical_note"]
    assert json.loads(audit_rows(ehr_path)[-2]["result"]) == {
        "id": allergy_id, "rows": row_claim(ehr_path, "allergy_intolerances", allergy_id)}


def test_allergy_severity_may_be_null(repo):
    repo.add_allergy("pat-002", "Adhesive tape", "Skin irritation", None, author="dr.test")
    chart = repo.get_patient_chart("pat-002")
    assert chart["allergies"][0]["severity"] is None


REJECTED_WRITES = [
    ("prescribe_medication", ("zzz-999", "Metformin", "500 mg", "BID", None), PatientNotFound, None),
    ("prescribe_medication", ("abc-123", "   ", "500 mg", "BID", None), InvalidField, "medication_name"),
    ("prescribe_medication", ("abc-123", "Metformin", "lots", "BID", None), InvalidField, "dosage"),
    ("prescribe_medication", ("abc-123", "Metformin", "500 mg", "whenever", None), InvalidField, "frequency"),
    ("prescribe_medication", ("  ", "Metformin", "500 mg", "BID", None), InvalidField, "patient_id"),
    ("add_allergy", ("abc-123", "", "Hives", "mild"), InvalidField, "substance"),
    ("add_allergy", ("abc-123", "Latex", " ", "mild"), InvalidField, "reaction"),
    ("add_allergy", ("abc-123", "Latex", "Hives", "extreme"), InvalidField, "severity"),
    ("add_allergy", ("zzz-999", "Latex", "Hives", "mild"), PatientNotFound, None),
    ("save_clinical_note", ("abc-123", "diary", "Text"), InvalidField, "note_type"),
    ("save_clinical_note", ("abc-123", "progress", "  \n "), InvalidField, "note_text"),
    ("save_clinical_note", ("zzz-999", "progress", "Text"), PatientNotFound, None),
]


@pytest.mark.parametrize("method,args,error,field", REJECTED_WRITES)
def test_rejected_writes_change_nothing(repo, ehr_path, method, args, error, field):
    before = row_counts(ehr_path)
    with pytest.raises(error) as exc:
        getattr(repo, method)(*args, author="dr.test")
    if field:
        assert exc.value.field == field
    assert row_counts(ehr_path) == before


def test_write_without_author_is_rejected(repo, ehr_path):
    before = row_counts(ehr_path)
    with pytest.raises(InvalidField, match="author"):
        repo.save_clinical_note("abc-123", "progress", "Text", author=" ")
    assert row_counts(ehr_path) == before
