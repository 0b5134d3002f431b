"""Loads the shipped synthetic demo patients (``ehr_db/demo/patients.json``).

Invariants:
- Demo data is synthetic and marked so: ``source = 'demo'`` on every row, which the chart
  reports as ``synthetic_demo_record``.
- Loading only adds patients whose ID is absent; a patient already present (and anything a
  clinician added to the chart) is never touched, so loading twice changes nothing.
- Record IDs are derived from the patient ID and position, so they are stable across loads.
- Codes come from ``ehr_db.codes``: condition codes must be in the SNOMED catalog, result
  codes in the LOINC catalog, and medication RxNorm codes are derived from the ingredient
  name (NULL when the ingredient is not catalogued).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from ehr_db.codes import LOINC_TESTS, RXNORM_SYSTEM, SNOMED_CONDITIONS, interpretation, rxnorm_for
from ehr_db.db import now_iso, write_transaction
from ehr_db.repository import audit, name_key

DEMO_FILE = Path(__file__).parent / "demo" / "patients.json"


def read_demo_patients(path: Path = DEMO_FILE) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("synthetic") is not True:
        raise ValueError("demo file is not marked synthetic")
    return data["patients"]


def load_demo_patients(db: Database, path: Path = DEMO_FILE) -> int:
    """Insert every demo patient not already present; returns how many were added."""
    patients = read_demo_patients(path)
    with write_transaction(db):
        present = {r[0] for r in db.execute("SELECT id FROM patients")}
        added = [p for p in patients if p["id"] not in present]
        for patient in added:
            _insert_patient(db, patient)
        if added:
            audit(db, "appliance-setup", "load_demo_patients", {"file": path.name},
                  {"patients_added": len(added)})
    return len(added)


def _insert_patient(db: Database, p: dict[str, Any]) -> None:
    pid, clinician = p["id"], p["clinician"]
    db["patients"].insert(
        {
            "id": pid,
            "mrn": p["mrn"],
            "family": p["family"],
            "given": p["given"],
            "name_key": name_key(p["given"], p["family"]),
            "birth_date": p["birth_date"],
            "sex": p["sex"],
            "city": p.get("city"),
            "state": p.get("state"),
            "source": "demo",
            "updated_at": now_iso(),
        }
    )
    for n, c in enumerate(p["conditions"], 1):
        code = c.get("snomed")
        if code is not None and code not in SNOMED_CONDITIONS:
            raise ValueError(f"demo condition code {code} is not in the SNOMED catalog")
        db["conditions"].insert(
            {
                "id": f"{pid}-cond-{n}",
                "patient_id": pid,
                "snomed_code": code,
                "display": c.get("display") or SNOMED_CONDITIONS[code],
                "clinical_status": c.get("status", "active"),
                "verification_status": "confirmed",
                "onset_date": c.get("onset"),
                "recorded_date": c.get("onset"),
                "source": "demo",
            }
        )
    for n, m in enumerate(p["medications"], 1):
        db["medication_requests"].insert(
            {
                "id": f"{pid}-med-{n}",
                "patient_id": pid,
                "rxnorm_code": rxnorm_for(m["name"]),
                "medication_name": m["name"],
                "dosage": m["dosage"],
                "frequency": m["frequency"],
                "status": m.get("status", "active"),
                "intent": "order",
                "notes": m.get("notes"),
                "author": m.get("author", clinician),
                "authored_at": m["start"],
                "source": "demo",
            }
        )
    for n, a in enumerate(p["allergies"], 1):
        code = rxnorm_for(a["substance"]) if a["category"] == "medication" else None
        db["allergy_intolerances"].insert(
            {
                "id": f"{pid}-alg-{n}",
                "patient_id": pid,
                "substance": a["substance"],
                "substance_code": code,
                "substance_system": RXNORM_SYSTEM if code else None,
                "category": a["category"],
                "reaction": a["reaction"],
                "severity": a["severity"],
                "clinical_status": "active",
                "author": a.get("author", clinician),
                "recorded_at": a["recorded"],
                "source": "demo",
            }
        )
    results = [*p["labs"], *p["vitals"]]
    for n, row in enumerate(results, 1):
        code, value, when = row[0], row[1], row[2]
        override = row[3] if len(row) > 3 else {}
        test = LOINC_TESTS[code]
        low, high = test.range_for(p["sex"])
        low, high = override.get("low", low), override.get("high", high)
        db["observations"].insert(
            {
                "id": f"{pid}-obs-{n}",
                "patient_id": pid,
                "loinc_code": code,
                "display": test.display,
                "value_num": float(value),
                "unit": test.unit,
                "ref_low": low,
                "ref_high": high,
                "interpretation": interpretation(float(value), low, high),
                "category": test.category,
                "status": "final",
                "effective_at": when,
                "source": "demo",
            }
        )
    for n, note in enumerate(p["notes"], 1):
        encounter_id = f"{pid}-enc-{n}"
        db["encounters"].insert(
            {
                "id": encounter_id,
                "patient_id": pid,
                "status": "finished",
                "class_code": "IMP" if note["type"] == "discharge" else "AMB",
                "type_display": note["title"],
                "period_start": note["date"],
                "period_end": note["date"],
                "source": "demo",
            }
        )
        db["document_references"].insert(
            {
                "id": f"{pid}-note-{n}",
                "patient_id": pid,
                "encounter_id": encounter_id,
                "note_type": note["type"],
                "title": note["title"],
                "text": note["text"],
                "author": note.get("author", clinician),
                "created_at": note["date"],
                "status": "current",
                "source": "demo",
            }
        )
