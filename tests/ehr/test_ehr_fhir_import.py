"""FHIR Bundle import on a Synthea-shaped fixture: counts, skips, idempotency, bad input."""

from __future__ import annotations

import copy
import json

import pytest
from ehr_helpers import FIXTURES, audit_rows, row_counts

from ehr_db.errors import BundleError
from ehr_db.fhir_import import import_fhir_bundle
from ehr_db.repository import EhrRepository

BUNDLE = FIXTURES / "synthea_bundle.json"
P1 = "6f1c2b1e-8a43-4c0e-9d1e-2f9b8c7a1d01"
P2 = "0b7e4d2a-5c6f-4b8e-a1d3-9e2f7c6b5a02"
EXPECTED_CREATED = {"patients": 2, "encounters": 1, "conditions": 2, "medication_requests": 2,
                    "allergy_intolerances": 1, "observations": 5, "document_references": 1}


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "import.sqlite"


def test_import_reports_created_rows_and_skips(db_path):
    report = import_fhir_bundle(db_path, BUNDLE)
    assert dict(report.created) == EXPECTED_CREATED
    assert not report.updated and not report.unchanged
    by_reason = {reason: dict(types) for reason, types in report.skipped_by_reason().items()}
    assert by_reason == {
        "unsupported resource type": {"Organization": 1, "Practitioner": 1, "Claim": 1, "ExplanationOfBenefit": 1},
        "not stored (used to name medication orders)": {"Medication": 1},
        "unsupported observation category": {"Observation": 1},
        "missing subject": {"Condition": 1},
        "unknown reference": {"Condition": 1},
    }
    summary = report.summary()
    assert "observations: 5 created" in summary and "skipped 1 (missing subject): Condition 1" in summary
    counts = row_counts(db_path)
    assert {t: counts[t] for t in EXPECTED_CREATED} == EXPECTED_CREATED
    assert [r["tool"] for r in audit_rows(db_path)] == ["fhir_import"]


def test_imported_patient_keeps_fhir_id_and_chart_is_mapped(db_path):
    import_fhir_bundle(db_path, BUNDLE)
    repo = EhrRepository(db_path)
    assert repo.search_patient("Jacinto644 Kris249")["matches"][0]["patient_id"] == P1
    assert repo.search_patient("lucia perez")["matches"][0]["patient_id"] == P2
    chart = repo.get_patient_chart(P1)
    assert chart["patient"]["mrn"] == "mrn-6f1c2b1e"
    assert [p["snomed_code"] for p in chart["active_problems"]] == ["44054006"]
    med = chart["medications"][0]
    assert (med["medication_name"], med["rxnorm_code"], med["frequency"], med["author"]) == \
        ("metformin", "6809", "twice daily", "Dr. Tomas436 Roob72")
    assert chart["allergies"][0]["substance_code"] == "7980"
    assert chart["allergies"][0]["reaction"] == "Hives"
    vitals = {v["loinc_code"]: v["value"] for v in chart["vitals"]}
    assert vitals == {"8480-6": 128, "8462-4": 82, "29463-7": 82.3}
    creatinine = next(lab for lab in chart["labs"] if lab["loinc_code"] == "2160-0")
    assert (creatinine["reference_range"], creatinine["flag"]) == ("0.7-1.3", "H")
    note = chart["recent_notes"][0]
    assert note["note_type"] == "other" and note["text"].startswith("SYNTHETIC TEST NOTE.")


def test_import_twice_changes_nothing(db_path):
    import_fhir_bundle(db_path, BUNDLE)
    before = row_counts(db_path)
    again = import_fhir_bundle(db_path, BUNDLE)
    assert not again.created and not again.updated
    assert dict(again.unchanged) == EXPECTED_CREATED
    assert row_counts(db_path) == before  # including no second audit row


def test_changed_resource_is_updated(db_path, tmp_path):
    import_fhir_bundle(db_path, BUNDLE)
    bundle = json.loads(BUNDLE.read_text())
    changed = copy.deepcopy(bundle)
    for entry in changed["entry"]:
        if entry["resource"]["id"] == "a1000000-0000-4000-8000-000000000001":
            entry["resource"]["valueQuantity"]["value"] = 6.8
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(changed))
    report = import_fhir_bundle(db_path, path)
    assert dict(report.updated) == {"observations": 1}
    labs = EhrRepository(db_path).get_patient_chart(P1)["labs"]
    assert next(lab for lab in labs if lab["loinc_code"] == "4548-4")["value"] == 6.8


def test_reference_to_patient_already_in_database(db_path, tmp_path):
    import_fhir_bundle(db_path, BUNDLE)
    later = {"resourceType": "Bundle", "type": "collection", "entry": [
        {"fullUrl": "urn:uuid:99999999-0000-4000-8000-000000000001",
         "resource": {"resourceType": "Condition", "id": "99999999-0000-4000-8000-000000000001",
                      "code": {"coding": [{"system": "http://snomed.info/sct", "code": "195967001", "display": "Asthma"}]},
                      "subject": {"reference": f"Patient/{P2}"}}}]}
    path = tmp_path / "later.json"
    path.write_text(json.dumps(later))
    report = import_fhir_bundle(db_path, path)
    assert dict(report.created) == {"conditions": 1}
    assert EhrRepository(db_path).get_patient_chart(P2)["active_problems"][0]["display"] == "Asthma"


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", "not valid JSON"),
        ('{"resourceType": "Patient", "id": "x"}', "not a FHIR Bundle"),
        ('["a list"]', "not a FHIR Bundle"),
        ('{"resourceType": "Bundle", "type": "searchset", "entry": []}', "unsupported Bundle type"),
        ('{"resourceType": "Bundle", "type": "collection", "entry": {}}', "not a list"),
    ],
)
def test_bad_files_raise_bundle_error_and_write_nothing(db_path, tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BundleError, match=message):
        import_fhir_bundle(db_path, path)
    assert not db_path.exists()


def test_missing_file(db_path, tmp_path):
    with pytest.raises(BundleError, match="cannot read"):
        import_fhir_bundle(db_path, tmp_path / "absent.json")
