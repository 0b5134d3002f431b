"""Read and write access to the local EHR, the only way the MCP server touches the database.

Invariants:
- Every write is validated first (patient exists, required fields non-empty after stripping,
  dosage/frequency/severity/note type plausible); a rejected write raises an ``EhrError`` and
  writes nothing.
- Every accepted write is one ``BEGIN IMMEDIATE`` transaction holding the new record and its
  ``audit_log`` row, with author and UTC time: both are stored or neither.
- Each call opens its own connection (``common.sqlite``: WAL, busy timeout, foreign keys on),
  so one repository may be used from many threads.
- Charts are read in one snapshot, so a concurrent write is seen whole or not at all.
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from common.sqlite import now_iso, opened, read_snapshot, write_transaction
from ehr_db import validation
from ehr_db.codes import rxnorm_for
from ehr_db.errors import DatabaseNotReady, InvalidField, PatientNotFound
from ehr_db.migrations import migrate

MAX_SEARCH_RESULTS = 20
RECENT_NOTES = 3
NOTE_PREVIEW_CHARS = 600
MAX_RESULT_CODES = 20  # distinct lab (or vital) codes shown in a chart


def fold(text: str) -> str:
    """Lower-case, accents removed, punctuation as spaces: the form names are searched in."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return " ".join(re.sub(r"[^\w]+", " ", plain).replace("_", " ").split())


def name_key(given: str, family: str) -> str:
    """' given family ' folded, padded so a search can match at word starts."""
    return f" {fold(f'{given} {family}')} "


def audit(db: Database, actor: str, tool: str, arguments: dict, result: dict | None,
          outcome: str = "success") -> None:
    """Append one audit row (inside the caller's transaction)."""
    db["audit_log"].insert(
        {
            "at": now_iso(),
            "actor": actor,
            "tool": tool,
            "arguments": json.dumps(arguments, sort_keys=True),
            "result": json.dumps(result, sort_keys=True) if result is not None else None,
            "outcome": outcome,
        }
    )


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


class EhrRepository:
    """The EHR database at ``path``; see the module docstring for the guarantees."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def _open(self):
        if not self.path.exists():
            raise DatabaseNotReady("the health record database has not been created")
        return opened(self.path)

    def migrate(self) -> list[str]:
        """Bring the schema up to date (idempotent)."""
        with self._open() as db:
            return migrate(db)

    # -- reads ----------------------------------------------------------------------------

    def search_patient(self, name: str, limit: int = MAX_SEARCH_RESULTS) -> dict[str, Any]:
        """Patients whose name contains every word of ``name`` at a word start, any order,
        case and accents ignored ('garcia', 'Maria Garcia', 'Garcia, Maria')."""
        tokens = fold(validation.required_text("name", name, 200)).split()
        if not tokens:
            raise InvalidField("name", "must contain letters")
        where = " AND ".join("name_key LIKE ?" for _ in tokens)
        params = [f"% {t}%" for t in tokens]
        exact = f" {' '.join(tokens)} "
        with self._open() as db, read_snapshot(db):
            total = db.execute(f"SELECT count(*) FROM patients WHERE {where}", params).fetchone()[0]
            rows = db.query(
                f"""SELECT id, given, family, birth_date, sex, mrn FROM patients WHERE {where}
                    ORDER BY name_key != ?, family, given, birth_date, id LIMIT ?""",
                [*params, exact, limit],
            )
            matches = [
                {
                    "patient_id": r["id"],
                    "name": f"{r['given']} {r['family']}".strip(),
                    "birth_date": r["birth_date"],
                    "sex": r["sex"],
                    "mrn": r["mrn"],
                }
                for r in rows
            ]
        return {"matches": matches, "total_matches": total}

    def get_patient_chart(self, patient_id: str, today: date | None = None) -> dict[str, Any]:
        """Demographics, active problems, medications, allergies, latest labs and vitals
        (units, reference ranges, H/L/N flags) and the most recent notes."""
        pid = validation.patient_id(patient_id)
        today = today or datetime.now(timezone.utc).date()
        with self._open() as db, read_snapshot(db):
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
                "active_problems": self._problems(db, pid),
                "medications": self._medications(db, pid),
                "allergies": self._allergies(db, pid),
                "labs": self._results(db, pid, "laboratory"),
                "vitals": self._results(db, pid, "vital-signs"),
                "recent_notes": self._notes(db, pid),
            }
        return chart

    @staticmethod
    def _problems(db: Database, pid: str) -> list[dict]:
        rows = db.query(
            """SELECT display, snomed_code, clinical_status, onset_date FROM conditions
               WHERE patient_id = ? AND clinical_status IN ('active', 'recurrence', 'relapse')
               ORDER BY onset_date DESC, display""",
            [pid],
        )
        return [dict(r) for r in rows]

    @staticmethod
    def _medications(db: Database, pid: str) -> list[dict]:
        rows = db.query(
            """SELECT id, medication_name, rxnorm_code, dosage, frequency, status, authored_at,
                      author, notes FROM medication_requests
               WHERE patient_id = ? AND status IN ('active', 'on-hold', 'draft')
               ORDER BY authored_at DESC, medication_name""",
            [pid],
        )
        return [dict(r) for r in rows]

    @staticmethod
    def _allergies(db: Database, pid: str) -> list[dict]:
        rows = db.query(
            """SELECT substance, substance_code, category, reaction, severity, recorded_at
               FROM allergy_intolerances WHERE patient_id = ? AND clinical_status = 'active'
               ORDER BY recorded_at DESC, substance""",
            [pid],
        )
        return [dict(r) for r in rows]

    @staticmethod
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

    @staticmethod
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

    # -- writes ---------------------------------------------------------------------------

    def _write(self, tool: str, table: str, patient_id: str, record: dict, author: str,
               arguments: dict) -> str:
        new_id = str(uuid.uuid4())
        with self._open() as db, write_transaction(db):
            if db.execute("SELECT 1 FROM patients WHERE id = ?", [patient_id]).fetchone() is None:
                raise PatientNotFound(patient_id)
            db[table].insert({"id": new_id, "patient_id": patient_id, **record, "source": "appliance"})
            audit(db, author, tool, {"patient_id": patient_id, **arguments}, {"id": new_id})
        return new_id

    def prescribe_medication(self, patient_id: str, medication_name: str, dosage: str,
                             frequency: str, notes: str | None = None, *, author: str) -> str:
        """Create an active medication order; returns its id."""
        pid = validation.patient_id(patient_id)
        args = {
            "medication_name": validation.required_text("medication_name", medication_name, 200),
            "dosage": validation.dosage(dosage),
            "frequency": validation.frequency(frequency),
            "notes": validation.optional_text("notes", notes, 2000),
        }
        who = validation.required_text("author", author, 200)
        record = {
            **args,
            "rxnorm_code": rxnorm_for(args["medication_name"]),
            "status": "active",
            "intent": "order",
            "author": who,
            "authored_at": now_iso(),
        }
        return self._write("prescribe_medication", "medication_requests", pid, record, who, args)

    def add_allergy(self, patient_id: str, substance: str, reaction: str,
                    severity: str | None, *, author: str) -> str:
        """Record an active allergy or intolerance; returns its id."""
        pid = validation.patient_id(patient_id)
        args = {
            "substance": validation.required_text("substance", substance, 200),
            "reaction": validation.required_text("reaction", reaction, 500),
            "severity": validation.severity(severity),
        }
        who = validation.required_text("author", author, 200)
        record = {
            **args,
            "substance_code": None,
            "substance_system": None,
            "clinical_status": "active",
            "author": who,
            "recorded_at": now_iso(),
        }
        return self._write("add_allergy", "allergy_intolerances", pid, record, who, args)

    def save_clinical_note(self, patient_id: str, note_type: str, note_text: str, *,
                           author: str) -> str:
        """Save a current clinical note; returns its id."""
        pid = validation.patient_id(patient_id)
        args = {
            "note_type": validation.note_type(note_type),
            "note_text": validation.required_text("note_text", note_text, 20000),
        }
        who = validation.required_text("author", author, 200)
        record = {
            "note_type": args["note_type"],
            "title": f"{args['note_type'].capitalize()} note",
            "text": args["note_text"],
            "author": who,
            "created_at": now_iso(),
            "status": "current",
        }
        return self._write("save_clinical_note", "document_references", pid, record, who, args)
