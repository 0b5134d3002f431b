"""`ehr export`: what the appliance wrote, as a FHIR R4 transaction Bundle that validates, with a
Provenance and an AuditEvent per write, conditional patients, and a cursor for the next export.
Real SQLite in temporary data homes; the record's own write paths."""

from __future__ import annotations

import json

import pytest
from fhir.resources.R4B.bundle import Bundle

from ehr_db import fhir_export
from ehr_db.fhir_export import ExportError, export_bundle
from ehr_db.fhir_export_resources import PATIENT_ID_SYSTEM
from ehr_db.repository import EhrRepository
from tests.ehr.export_helpers import (
    CLINICIAN,
    OVERRIDE_REASON,
    afternoon,
    approval_parts,
    approved,
    bundle,
    make_home,
    of_type,
)


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


@pytest.fixture
def record(home):
    path = make_home(home)
    return path, afternoon(path)


def export(home, out, **kwargs):
    return export_bundle(home / "ehr.sqlite", out, home / "export-signing.key", home / "export-cursor.json", **kwargs)


def test_the_afternoon_exports_as_a_valid_r4_transaction(home, record, tmp_path):
    _, ids = record
    report = export(home, tmp_path / "out.json")
    data = bundle(report.path)
    Bundle.model_validate(data)  # raises on anything FHIR R4 (R4B models) refuses
    assert data["type"] == "transaction"
    assert report.writes == 6 and len(of_type(data, "Provenance")) == 6 and len(of_type(data, "AuditEvent")) == 6
    orders = {r["id"]: r for r in of_type(data, "MedicationRequest")}
    assert set(orders) == {ids["prn"], ids["changed_new"], ids["changed_old"], ids["stopped"], ids["override"]}
    assert orders[ids["stopped"]]["status"] == "stopped"
    assert orders[ids["stopped"]]["statusReason"] == {"text": "bleeding"}
    assert orders[ids["changed_old"]]["status"] == "stopped"
    assert orders[ids["changed_new"]]["status"] == "active"
    assert orders[ids["changed_new"]]["priorPrescription"]["reference"].startswith("urn:uuid:")
    prior = orders[ids["changed_new"]]["priorPrescription"]["reference"]
    assert next(e for e in data["entry"] if e["fullUrl"] == prior)["resource"]["id"] == ids["changed_old"]
    sig = orders[ids["prn"]]["dosageInstruction"][0]
    assert sig["text"].startswith("650 mg every 6 hours as needed")
    assert sig["timing"]["repeat"] == {"frequency": 1, "period": 6, "periodUnit": "h", "boundsDuration": {
        "value": 7, "unit": "days", "system": "http://unitsofmeasure.org", "code": "d"}}
    assert sig["asNeededCodeableConcept"] == {"text": "pain"}
    assert sig["maxDosePerPeriod"]["numerator"] == {"value": 4, "unit": "g"}
    assert sig["maxDosePerPeriod"]["denominator"]["value"] == 1
    assert sig["doseAndRate"] == [{"doseQuantity": {"value": 650, "unit": "mg"}}]
    (allergy,) = of_type(data, "AllergyIntolerance")
    assert allergy["id"] == ids["allergy"] and allergy["reaction"][0]["severity"] == "moderate"
    (note,) = of_type(data, "DocumentReference")
    assert note["id"] == ids["note"] and note["type"]["coding"][0]["code"] == "34748-4"


def test_each_write_has_a_provenance_naming_the_clinician_and_approval(home, record, tmp_path):
    _, ids = record
    data = bundle(export(home, tmp_path / "out.json").path)
    urls = {e["resource"].get("id"): e["fullUrl"] for e in data["entry"]}
    by_target = {}
    for provenance in of_type(data, "Provenance"):
        for target in provenance["target"]:
            by_target.setdefault(target["reference"], []).append(provenance)
        assert provenance["agent"][0]["who"]["identifier"]["value"] == "ada"
        assert approval_parts(provenance)["clinician"] == [CLINICIAN]
    override = by_target[urls[ids["override"]]][0]
    parts = approval_parts(override)
    assert parts["decision"] == ["override"] and parts["overrideReason"] == [OVERRIDE_REASON]
    finding = {p["url"]: next(v for k, v in p.items() if k.startswith("value")) for p in parts["finding"][0]}
    assert finding == {"severity": "high", "kind": "interaction", "text": "warfarin and ibuprofen: bleeding risk"}
    assert approval_parts(by_target[urls[ids["allergy"]]][0])["decision"] == ["approval"]
    # the change wrote two orders: one Provenance names both
    assert by_target[urls[ids["changed_new"]]] == by_target[urls[ids["changed_old"]]]
    audit = {e["entity"][0]["what"]["reference"]: e for e in of_type(data, "AuditEvent")}
    assert audit[urls[ids["note"]]]["action"] == "C"
    assert audit[urls[ids["stopped"]]]["action"] == "U"


def test_patients_are_conditional_creates_on_the_appliance_identifier(home, record, tmp_path):
    data = bundle(export(home, tmp_path / "out.json").path)
    patients = [e for e in data["entry"] if e["resource"]["resourceType"] == "Patient"]
    assert sorted(e["resource"]["id"] for e in patients) == ["abc-123", "pat-005"]
    for entry in patients:
        pid = entry["resource"]["id"]
        assert entry["request"] == {"method": "POST", "url": "Patient",
                                    "ifNoneExist": f"identifier={PATIENT_ID_SYSTEM}|{pid}"}
        assert {"system": PATIENT_ID_SYSTEM, "value": pid} in entry["resource"]["identifier"]
    for entry in data["entry"]:
        if entry["resource"]["resourceType"] != "Patient":  # updates by id: sending twice changes nothing
            assert entry["request"]["method"] == "PUT"
            assert entry["request"]["url"] == f"{entry['resource']['resourceType']}/{entry['resource']['id']}"
    subjects = {r["subject"]["reference"] for r in of_type(data, "MedicationRequest")}
    assert subjects == {e["fullUrl"] for e in patients}


def test_patient_filter_keeps_one_patients_writes_and_leaves_the_cursor(home, record, tmp_path):
    _, ids = record
    report = export(home, tmp_path / "out.json", patient="pat-005")
    data = bundle(report.path)
    assert [r["id"] for r in of_type(data, "Patient")] == ["pat-005"]
    assert {r["id"] for r in of_type(data, "MedicationRequest")} == {ids["stopped"], ids["override"]}
    assert report.writes == 2 and not report.cursor_advanced
    assert not (home / "export-cursor.json").exists()
    with pytest.raises(ExportError, match="not in the record"):
        export(home, tmp_path / "other.json", patient="nobody-1")


def test_the_cursor_carries_only_what_is_new(home, record, tmp_path):
    first = export(home, tmp_path / "1.json", since_export=True)
    assert first.writes == 6 and first.cursor_advanced
    repo = EhrRepository(home / "ehr.sqlite")
    later = repo.add_allergy("pat-005", "codeine", "nausea", "mild", author="ada", approval=approved())
    second = export(home, tmp_path / "2.json", since_export=True)
    assert second.writes == 1
    assert [r["id"] for r in of_type(bundle(second.path), "AllergyIntolerance")] == [later]
    third = export(home, tmp_path / "3.json", since_export=True)
    assert third.writes == 0 and bundle(third.path)["entry"] == []


def test_a_failed_export_does_not_move_the_cursor(home, record, tmp_path, monkeypatch):
    export(home, tmp_path / "1.json", since_export=True)
    cursor = (home / "export-cursor.json").read_text()
    EhrRepository(home / "ehr.sqlite").add_allergy("pat-005", "codeine", "nausea", None, author="ada")

    def refuse(bundle):
        raise ExportError("refused for the test")

    monkeypatch.setattr(fhir_export, "validate", refuse)
    with pytest.raises(ExportError):
        export(home, tmp_path / "2.json", since_export=True)
    assert (home / "export-cursor.json").read_text() == cursor
    monkeypatch.undo()
    assert export(home, tmp_path / "2.json", since_export=True).writes == 1


def test_a_cursor_from_another_record_is_refused(home, record, tmp_path):
    export(home, tmp_path / "1.json", since_export=True)
    cursor = json.loads((home / "export-cursor.json").read_text())
    (home / "export-cursor.json").write_text(json.dumps({**cursor, "hash": "0" * 64}))
    with pytest.raises(ExportError, match="does not match this record"):
        export(home, tmp_path / "2.json", since_export=True)
    assert not (tmp_path / "2.json").exists()


def test_since_a_date_and_its_bad_forms(home, record, tmp_path):
    assert export(home, tmp_path / "past.json", since="2000-01-01").writes == 6
    assert export(home, tmp_path / "future.json", since="2999-01-01T00:00:00Z").writes == 0
    with pytest.raises(ExportError, match="not a date"):
        export(home, tmp_path / "bad.json", since="yesterday")
    with pytest.raises(ExportError, match="not both"):
        export(home, tmp_path / "both.json", since="2000-01-01", since_export=True)


def test_imports_and_demo_loads_are_not_exported(home, tmp_path):
    make_home(home)  # the demo load is audited, but it is not a write of the appliance's
    report = export(home, tmp_path / "out.json")
    assert report.writes == 0 and bundle(report.path)["entry"] == []


def test_an_invalid_bundle_is_refused_before_anything_is_written(home, record, tmp_path, monkeypatch):
    from ehr_db import fhir_export_resources as fr

    real = fr.allergy
    monkeypatch.setattr(fr, "allergy", lambda *a: {**real(*a), "recordedDate": "last tuesday"})
    with pytest.raises(ExportError, match="does not validate as FHIR R4.*recordedDate"):
        export(home, tmp_path / "out.json")
    assert list(tmp_path.glob("out.json*")) == [] and not (home / "export-cursor.json").exists()


PARSED_SIG = {  # the order parser's shapes (appliance/medication/sig.py) for "oxycodone 5-10 mg po q4-6h prn pain"
    "as_needed": True, "as_needed_for": "pain", "max_per_period": "max 40 mg/day", "duration": "x 5 days",
    "quantity": "#30", "refills": 0,
    "dosage_instruction": {
        "text": "oxycodone 5-10 mg po q4-6h prn pain", "route": {"text": "po"},
        "timing": {"repeat": {"frequency": 1, "period": 4.0, "periodMax": 6.0, "periodUnit": "h",
                              "boundsDuration": {"value": 5, "unit": "d", "system": "http://unitsofmeasure.org",
                                                 "code": "d"}}, "code": {"text": "q4-6h prn pain"}},
        "asNeededCodeableConcept": {"text": "pain"},
        "doseAndRate": [{"doseRange": {"low": {"value": 5, "unit": "mg"}, "high": {"value": 10, "unit": "mg"}}}],
        "maxDosePerPeriod": {"numerator": {"value": 40, "unit": "mg"},
                             "denominator": {"value": 1, "unit": "d", "system": "http://unitsofmeasure.org",
                                             "code": "d"}}},
    "dispense_request": {"quantity": {"value": 30}, "numberOfRepeatsAllowed": 0,
                         "expectedSupplyDuration": {"value": 5, "unit": "d"}},
}


def test_an_orders_own_structured_sig_goes_out_and_comes_back_exactly(home, tmp_path):
    import sqlite3

    from ehr_db.fhir_import import import_fhir_bundle
    from ehr_db.setup import ensure_database

    path = make_home(home)
    order = EhrRepository(path).prescribe_medication("pat-003", "oxycodone", "5-10 mg po", "q4-6h prn pain",
                                                     author="ada", approval=approved("oxycodone"), sig=PARSED_SIG)
    data = bundle(export(home, tmp_path / "out.json").path)
    Bundle.model_validate(data)
    (request,) = of_type(data, "MedicationRequest")
    sig = request["dosageInstruction"][0]
    assert sig["timing"]["repeat"]["periodMax"] == 6.0 and sig["route"] == {"text": "po"}
    assert sig["asNeededCodeableConcept"] == {"text": "pain"} and "asNeededBoolean" not in sig
    assert request["dispenseRequest"]["numberOfRepeatsAllowed"] == 0
    other = tmp_path / "other.sqlite"
    ensure_database(other, load_demo=False)
    import_fhir_bundle(other, tmp_path / "out.json")

    def row(db_path):
        conn = sqlite3.connect(db_path)
        conn.row_factory = sqlite3.Row
        try:
            return {k: v for k, v in dict(conn.execute("SELECT * FROM medication_requests WHERE id = ?",
                                                       [order]).fetchone()).items() if k != "source"}
        finally:
            conn.close()

    assert row(other) == row(path)
    assert json.loads(row(other)["dosage_instruction"]) == PARSED_SIG["dosage_instruction"]
