"""Loads the shipped synthetic demo patients (``ehr_db/demo/patients.json``).

Invariants:
- Demo data is synthetic and marked so: ``source = 'demo'`` on every row, which the chart
  reports as ``synthetic_demo_record``.
- Loading adds demo patients whose ID is absent and refreshes the rows that came from the demo
  source (``source = 'demo'``) of patients already present, so a database built from an older
  demo file or code catalog gets the corrected rows. Only rows with ``source = 'demo'`` are ever
  updated; anything a clinician or an import wrote is never touched, and no row is deleted.
  Loading twice changes nothing the second time (no rewrite, no audit row).
- Record IDs are derived from the patient ID and position, so they are stable across loads.
- A load and a refresh are each one audited event recording every row's digest
  (``ehr_db.custody``), in the load's transaction.
- Codes come from ``ehr_db.codes``: condition codes must be in the SNOMED catalog, result
  codes in the LOINC catalog, and medication RxNorm codes are derived from the ingredient
  name (NULL when the ingredient is not catalogued).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from common.sqlite import now_iso, write_transaction
from ehr_db import custody
from ehr_db.codes import (
    LOINC_TESTS,
    RXNORM_SYSTEM,
    SNOMED_CONDITIONS,
    interpretation,
    rxnorm_for,
)
from ehr_db.repository import name_key

DEMO_FILE = Path(__file__).parent / "demo" / "patients.json"

# Tables in insertion order (a row's references come before it).
_TABLES = ("patients", "conditions", "medication_requests", "allergy_intolerances", "observations",
           "encounters", "document_references")
# Columns that say when a row was written, not what it holds: never a reason to refresh.
_VOLATILE = frozenset({"updated_at"})


@dataclass(frozen=True)
class DemoLoad:
    """What one demo load did."""

    patients_added: int = 0
    rows_refreshed: int = 0
    rows_added: int = 0


def read_demo_patients(path: Path = DEMO_FILE) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("synthetic") is not True:
        raise ValueError("demo file is not marked synthetic")
    return data["patients"]


def load_demo_patients(db: Database, path: Path = DEMO_FILE) -> int:
    """Insert every demo patient not already present; returns how many were added.

    Demo rows of patients already present are refreshed too (see ``sync_demo_patients``)."""
    return sync_demo_patients(db, path).patients_added


def sync_demo_patients(db: Database, path: Path = DEMO_FILE) -> DemoLoad:
    """Add absent demo patients and bring the demo-sourced rows of present ones up to date."""
    patients = read_demo_patients(path)
    added = refreshed = new_rows = 0
    with write_transaction(db):
        loaded, renewed = custody.RowChanges(db), custody.RowChanges(db)
        for patient in patients:
            rows = demo_rows(patient)
            present = db.execute("SELECT source FROM patients WHERE id = ?", [patient["id"]]).fetchone()
            if present is None:
                for table in _TABLES:
                    for row in rows[table]:
                        loaded.before(table, row["id"])
                        db[table].insert(row)
                        loaded.after(table, row["id"])
                added += 1
                continue
            if present[0] != "demo":
                continue  # an imported or clinician-created patient that happens to share the ID
            r, n = _refresh(db, rows, renewed)
            refreshed, new_rows = refreshed + r, new_rows + n
        if added:
            custody.append(db, "appliance-setup", "load_demo_patients", {"file": path.name},
                           {"patients_added": added}, loaded)
        if refreshed or new_rows:
            custody.append(db, "appliance-setup", "refresh_demo_patients", {"file": path.name},
                           {"rows_refreshed": refreshed, "rows_added": new_rows}, renewed)
    return DemoLoad(added, refreshed, new_rows)


def _refresh(db: Database, rows: dict[str, list[dict[str, Any]]], changes: custody.RowChanges) -> tuple[int, int]:
    refreshed = added = 0
    for table in _TABLES:
        for row in rows[table]:
            cursor = db.execute(f"SELECT * FROM [{table}] WHERE id = ?", [row["id"]])
            found = cursor.fetchone()
            if found is None:
                changes.before(table, row["id"])
                db[table].insert(row)
                changes.after(table, row["id"])
                added += 1
                continue
            current = dict(zip((c[0] for c in cursor.description), found))
            if current.get("source") != "demo":
                continue
            update = {k: v for k, v in row.items() if k not in _VOLATILE and current.get(k) != v}
            if update:
                if "updated_at" in row:
                    update["updated_at"] = row["updated_at"]
                changes.before(table, row["id"])
                db[table].update(row["id"], update)
                changes.after(table, row["id"])
                refreshed += 1
    return refreshed, added


def demo_rows(p: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The database rows of one demo patient, by table."""
    pid, clinician = p["id"], p["clinician"]
    rows: dict[str, list[dict[str, Any]]] = {table: [] for table in _TABLES}
    rows["patients"].append({
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
    })
    for n, c in enumerate(p["conditions"], 1):
        code = c.get("snomed")
        if code is not None and code not in SNOMED_CONDITIONS:
            raise ValueError(f"demo condition code {code} is not in the SNOMED catalog")
        rows["conditions"].append({
            "id": f"{pid}-cond-{n}",
            "patient_id": pid,
            "snomed_code": code,
            "display": c.get("display") or SNOMED_CONDITIONS[code],
            "clinical_status": c.get("status", "active"),
            "verification_status": "confirmed",
            "onset_date": c.get("onset"),
            "recorded_date": c.get("onset"),
            "source": "demo",
        })
    for n, m in enumerate(p["medications"], 1):
        rows["medication_requests"].append({
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
        })
    for n, a in enumerate(p["allergies"], 1):
        code = rxnorm_for(a["substance"]) if a["category"] == "medication" else None
        rows["allergy_intolerances"].append({
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
        })
    for n, row in enumerate([*p["labs"], *p["vitals"]], 1):
        code, value, when = row[0], row[1], row[2]
        override = row[3] if len(row) > 3 else {}
        test = LOINC_TESTS[code]
        low, high = test.range_for(p["sex"])
        low, high = override.get("low", low), override.get("high", high)
        rows["observations"].append({
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
        })
    for n, note in enumerate(p["notes"], 1):
        encounter_id = f"{pid}-enc-{n}"
        rows["encounters"].append({
            "id": encounter_id,
            "patient_id": pid,
            "status": "finished",
            "class_code": "IMP" if note["type"] == "discharge" else "AMB",
            "type_display": note["title"],
            "period_start": note["date"],
            "period_end": note["date"],
            "source": "demo",
        })
        rows["document_references"].append({
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
        })
    return rows
