"""The shipped demo patients: synthetic, complete for the scenarios (docs/design.md §15), and coded correctly."""

from __future__ import annotations

import re
from collections import Counter
from datetime import date

import pytest
from ehr_helpers import row_counts

from ehr_db import validation
from ehr_db.codes import LOINC_TESTS, RXNORM_INGREDIENTS, SNOMED_CONDITIONS, rxnorm_for
from ehr_db.demo_loader import read_demo_patients
from ehr_db.setup import ensure_database

PATIENTS = read_demo_patients()
BY_ID = {p["id"]: p for p in PATIENTS}
TODAY = date(2026, 11, 1)


def _age(p) -> int:
    born = date.fromisoformat(p["birth_date"])
    return TODAY.year - born.year - ((TODAY.month, TODAY.day) < (born.month, born.day))


def _names(p):
    return f"{p['given']} {p['family']}"


def test_enough_patients_with_agent_style_ids():
    assert len(PATIENTS) >= 22
    assert len(BY_ID) == len(PATIENTS)
    assert all(re.fullmatch(r"[a-z]{3}-\d{3}", p["id"]) for p in PATIENTS)
    assert [p["id"] for p in PATIENTS[1:]] == [f"pat-{n:03d}" for n in range(1, len(PATIENTS))]


def test_seed_scenario_patients():
    names = Counter(_names(p) for p in PATIENTS)
    assert names["James Wilson"] == 3
    assert len({p["birth_date"] for p in PATIENTS if _names(p) == "James Wilson"}) == 3
    assert names["Maria Garcia"] == 1
    john = BY_ID["abc-123"]
    assert _names(john) == "John Smith"
    codes = {c["snomed"] for c in john["conditions"]}
    assert {"44054006", "433144002"} <= codes
    assert any(rxnorm_for(m["name"]) == "6809" and m.get("status", "active") == "active" for m in john["medications"])


def _active(p, snomed):
    return any(c["snomed"] == snomed and c.get("status", "active") == "active" for c in p["conditions"])


def test_required_clinical_situations_are_present():
    assert any(_active(p, "49436004") and any(rxnorm_for(m["name"]) == "11289" for m in p["medications"])
               for p in PATIENTS), "warfarin for atrial fibrillation"
    assert any(a["substance"].lower().startswith("penicillin") for p in PATIENTS for a in p["allergies"])
    assert any(_age(p) < 18 for p in PATIENTS), "paediatric patient"
    assert any(_active(p, "77386006") and p["sex"] == "female" for p in PATIENTS), "pregnant patient"


def test_every_code_is_catalogued():
    for p in PATIENTS:
        for c in p["conditions"]:
            assert c["snomed"] is None or c["snomed"] in SNOMED_CONDITIONS, (p["id"], c)
        for row in [*p["labs"], *p["vitals"]]:
            assert row[0] in LOINC_TESTS, (p["id"], row)
        for row in p["labs"]:
            assert LOINC_TESTS[row[0]].category == "laboratory", row
        for row in p["vitals"]:
            assert LOINC_TESTS[row[0]].category == "vital-signs", row


def test_demo_orders_pass_the_write_checks():
    for p in PATIENTS:
        for m in p["medications"]:
            validation.dosage(m["dosage"])
            validation.frequency(m["frequency"])
        for a in p["allergies"]:
            validation.severity(a["severity"])
        for n in p["notes"]:
            validation.note_type(n["type"])


# Anchors: codes whose meaning is certain, checked against what the catalogs say.
ANCHORS = [
    (SNOMED_CONDITIONS, "38341003", "Hypertensive disorder"),
    (SNOMED_CONDITIONS, "44054006", "Type 2 diabetes mellitus"),
    (SNOMED_CONDITIONS, "49436004", "Atrial fibrillation"),
    (SNOMED_CONDITIONS, "433144002", "Chronic kidney disease stage 3"),
    (SNOMED_CONDITIONS, "195967001", "Asthma"),
    (SNOMED_CONDITIONS, "77386006", "Pregnancy"),
]
RX_ANCHORS = {"metformin": "6809", "warfarin": "11289", "aspirin": "1191", "ibuprofen": "5640",
              "amoxicillin": "723", "lisinopril": "29046", "atorvastatin": "83367", "acetaminophen": "161"}
LOINC_ANCHORS = {"4548-4": "Hemoglobin A1c", "2160-0": "Creatinine", "33914-3": "eGFR", "6301-6": "INR",
                 "8480-6": "Systolic blood pressure", "8462-4": "Diastolic blood pressure", "718-7": "Hemoglobin"}


@pytest.mark.parametrize("catalog,code,display", ANCHORS)
def test_snomed_anchors(catalog, code, display):
    assert catalog[code] == display


@pytest.mark.parametrize("name,code", RX_ANCHORS.items())
def test_rxnorm_anchors(name, code):
    assert RXNORM_INGREDIENTS[name] == code
    assert rxnorm_for(f"{name.capitalize()} 500 mg tablet") == code


@pytest.mark.parametrize("code,display", LOINC_ANCHORS.items())
def test_loinc_anchors(code, display):
    assert LOINC_TESTS[code].display == display


def test_unknown_drug_gets_no_code():
    assert rxnorm_for("Donepezil") is None
    assert rxnorm_for("Penicillin") is None  # the class, not penicillin G


def test_ensure_database_is_idempotent(tmp_path):
    path = tmp_path / "ehr.sqlite"
    messages = []
    ensure_database(path, messages.append)
    first = row_counts(path)
    assert first["patients"] == len(PATIENTS)
    ensure_database(path, messages.append)
    assert row_counts(path) == first
    assert any("loaded" in m for m in messages) and messages[-1] == "demo patients present"


def test_ensure_database_keeps_clinician_changes(tmp_path):
    from ehr_db.repository import EhrRepository

    path = tmp_path / "ehr.sqlite"
    ensure_database(path)
    repo = EhrRepository(path)
    repo.save_clinical_note("abc-123", "progress", "Seen today.", author="dr.test")
    ensure_database(path)
    assert repo.get_patient_chart("abc-123")["recent_notes"][0]["text"] == "Seen today."


def test_ensure_database_without_demo(tmp_path):
    path = tmp_path / "ehr.sqlite"
    ensure_database(path, load_demo=False)
    assert row_counts(path)["patients"] == 0
