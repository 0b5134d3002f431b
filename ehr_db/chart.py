"""A patient's chart as the record shows it: demographics with the age on a given day, active
problems, current and past medication orders, active allergies, the latest labs and vitals and
the most recent notes.

Invariants:
- ``read_chart`` only reads; the caller holds one read snapshot around it
  (``EhrRepository.get_patient_chart``), so a concurrent write is seen whole or not at all.
- Results: the latest value per code (LOINC, else the display name) with the previous one for
  the trend, newest first, at most ``MAX_RESULT_CODES`` codes per category; a reference range
  is written as "low-high", "<=high" or ">=low"; whole numbers are shown without ".0".
- Notes: the ``RECENT_NOTES`` newest current notes, each cut at ``NOTE_PREVIEW_CHARS`` with
  ``truncated`` saying so.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlite_utils import Database

from ehr_db import order_changes
from ehr_db.errors import PatientNotFound

RECENT_NOTES = 3
NOTE_PREVIEW_CHARS = 600
MAX_RESULT_CODES = 20  # distinct lab (or vital) codes shown in a chart


def read_chart(db: Database, pid: str, today: date) -> dict[str, Any]:
    """The chart of patient ``pid`` (raises ``PatientNotFound``), ages taken on ``today``."""
    rows = list(db.query("SELECT * FROM patients WHERE id = ?", [pid]))
    if not rows:
        raise PatientNotFound(pid)
    p = rows[0]
    chart = {
        "patient": {
            "patient_id": p["id"],
            "name": f"{p['given']} {p['family']}".strip(),
            "birth_date": p["birth_date"],
            "age": _age(p["birth_date"], today),
            "sex": p["sex"],
            "mrn": p["mrn"],
            "deceased_date": p["deceased_date"],
        },
        "synthetic_demo_record": p["source"] == "demo",
        "active_problems": _problems(db, pid),
        "medications": _medications(db, pid),
        "past_medications": order_changes.past_orders(db, pid),
        "allergies": _allergies(db, pid),
        "labs": _results(db, pid, "laboratory"),
        "vitals": _results(db, pid, "vital-signs"),
        "recent_notes": _notes(db, pid),
    }
    return chart


def _problems(db: Database, pid: str) -> list[dict]:
    rows = db.query(
        """SELECT display, snomed_code, clinical_status, onset_date FROM conditions
           WHERE patient_id = ? AND clinical_status IN ('active', 'recurrence', 'relapse')
           ORDER BY onset_date DESC, display""",
        [pid],
    )
    return [dict(r) for r in rows]


def _medications(db: Database, pid: str) -> list[dict]:
    rows = db.query(
        """SELECT id, medication_name, rxnorm_code, dosage, frequency, status, authored_at,
                  author, notes, as_needed, as_needed_for, max_per_period, duration, replaces_id,
                  status_reason FROM medication_requests
           WHERE patient_id = ? AND status IN ('active', 'on-hold', 'draft')
           ORDER BY authored_at DESC, medication_name""",
        [pid],
    )
    return [dict(r) for r in rows]


def _allergies(db: Database, pid: str) -> list[dict]:
    rows = db.query(
        """SELECT substance, substance_code, category, reaction, severity, recorded_at
           FROM allergy_intolerances WHERE patient_id = ? AND clinical_status = 'active'
           ORDER BY recorded_at DESC, substance""",
        [pid],
    )
    return [dict(r) for r in rows]


def _results(db: Database, pid: str, category: str) -> list[dict]:
    """Latest result per code (with the previous one for trend), newest codes first."""
    rows = db.query(
        """SELECT * FROM observations WHERE patient_id = ? AND category = ?
           ORDER BY effective_at DESC, rowid""",
        [pid, category],
    )
    latest: dict[str, dict] = {}
    for r in rows:
        key = r["loinc_code"] or r["display"]
        value = _number(r["value_num"]) if r["value_num"] is not None else r["value_text"]
        if key in latest:
            if latest[key]["previous"] is None:
                latest[key]["previous"] = {"value": value, "effective_at": r["effective_at"]}
            continue
        if len(latest) >= MAX_RESULT_CODES:
            continue
        latest[key] = {
            "display": r["display"],
            "loinc_code": r["loinc_code"],
            "value": value,
            "unit": r["unit"],
            "reference_range": _range_text(r["ref_low"], r["ref_high"]),
            "flag": r["interpretation"],
            "effective_at": r["effective_at"],
            "previous": None,
        }
    return list(latest.values())


def _notes(db: Database, pid: str) -> list[dict]:
    rows = db.query(
        """SELECT id, note_type, title, author, created_at, text FROM document_references
           WHERE patient_id = ? AND status = 'current'
           ORDER BY created_at DESC, id LIMIT ?""",
        [pid, RECENT_NOTES],
    )
    notes = []
    for r in rows:
        text = r["text"]
        truncated = len(text) > NOTE_PREVIEW_CHARS
        notes.append({**dict(r), "text": text[:NOTE_PREVIEW_CHARS], "truncated": truncated})
    return notes


def _age(birth_date: str | None, today: date) -> int | None:
    try:
        born = date.fromisoformat((birth_date or "")[:10])
    except ValueError:
        return None
    return today.year - born.year - ((today.month, today.day) < (born.month, born.day))


def _number(value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


def _range_text(low: float | None, high: float | None) -> str | None:
    if low is not None and high is not None:
        return f"{_number(low)}-{_number(high)}"
    if high is not None:
        return f"<={_number(high)}"
    if low is not None:
        return f">={_number(low)}"
    return None
