"""Read and write access to the local EHR, the only way the MCP server touches the database.

Invariants:
- Every write is validated first (patient exists, required fields non-empty after stripping,
  dosage/frequency/severity/note type plausible); a rejected write raises an ``EhrError`` and
  writes nothing.
- Every accepted write is one ``BEGIN IMMEDIATE`` transaction holding the new record and its
  ``audit_log`` row, with author and UTC time: both are stored or neither. The time is read
  after the write lock is taken, so the record and its audit row carry the same instant.
- The audit log is a hash chain (``ehr_db.audit``); writes and non-write events
  (``record_event``) are appended to it, and its head is anchored beside the file after commit
  (and copied to the accounts and sessions databases beside it: ``ehr_db.heads``). A write's
  audit row also records the digest of the row it wrote (``ehr_db.custody``).
- A prescription's drug or an allergy's substance may not be the patient's own name.
- A write may carry an idempotency key (made by the caller, once per intended write). The key
  is stored in ``write_keys`` (unique) in the write's own transaction; a write whose key is
  already there writes nothing, adds no audit row and returns the first write's record id, so
  a write that reaches the record twice (a retry, a resent request) is performed once. A key
  reused for a different write is refused.
- A write may carry its approval (``validation.approval``: approval or override, who decided,
  the safety report). It is kept in the write's own audit row (``result.approval``), so the
  write and the decision it ran under are stored together or not at all; it is not part of
  what a repeated key is compared on, so a retried write is still recognised.
- Each call opens its own connection (``common.sqlite``: WAL, busy timeout, foreign keys on),
  so one repository may be used from many threads.
- Charts are read in one snapshot (what a chart holds: ``ehr_db.chart``), so a concurrent write
  is seen whole or not at all.
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from common.sqlite import now_iso, opened, read_snapshot, write_transaction
from ehr_db import audit as audit_chain
from ehr_db import custody, heads, name_match, order_changes, validation
from ehr_db.chart import read_chart
from ehr_db.codes import rxnorm_for
from ehr_db.errors import DatabaseNotReady, InvalidField, PatientNotFound
from ehr_db.migrations import migrate

MAX_SEARCH_RESULTS = 20


def fold(text: str) -> str:
    """Lower-case, accents removed, punctuation as spaces: the form names are searched in."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return " ".join(re.sub(r"[^\w]+", " ", plain).replace("_", " ").split())


def name_key(given: str, family: str) -> str:
    """' given family ' folded, padded so a search can match at word starts."""
    return f" {fold(f'{given} {family}')} "


def audit(db: Database, actor: str, tool: str, arguments: dict, result: dict | None,
          outcome: str = "success", at: str | None = None) -> None:
    """Append one row to the hash-chained audit log (inside the caller's transaction)."""
    audit_chain.append(db, actor, tool, arguments, result, outcome, at)


_KEY_RE = re.compile(r"[A-Za-z0-9._:-]{8,100}")


def _idempotency_key(value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _KEY_RE.fullmatch(value.strip()):
        raise InvalidField("idempotency_key", "must be 8-100 letters, digits, '.', '_', ':' or '-'")
    return value.strip()


def _is_patient_name(value: str, given: str, family: str) -> bool:
    """Whether ``value`` is the patient's name (whole, either order, or one part of it)."""
    folded = fold(value)
    parts = {fold(given), fold(family), fold(f"{given} {family}"), fold(f"{family} {given}")}
    return bool(folded) and folded in parts - {""}


class EhrRepository:
    """The EHR database at ``path``; see the module docstring for the guarantees."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def _open(self):
        if not self.path.exists():
            raise DatabaseNotReady("the health record database has not been created")
        return opened(self.path)

    def _open_read(self):
        if not self.path.exists():
            raise DatabaseNotReady("the health record database has not been created")
        return opened(self.path, read_only=True)

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
            if total == 0:  # no exact match: the closest names, for "did you mean ..." (ehr_db.name_match)
                everyone = db.query("SELECT id, given, family, birth_date, sex, mrn, name_key FROM patients")
                near = name_match.closest(" ".join(tokens), list(everyone))
                return {"matches": [], "total_matches": 0, "closest": [
                    {"patient_id": r["id"], "name": f"{r['given']} {r['family']}".strip(),
                     "birth_date": r["birth_date"], "sex": r["sex"], "mrn": r["mrn"]} for r in near]}
        return {"matches": matches, "total_matches": total}

    def get_patient_chart(self, patient_id: str, today: date | None = None) -> dict[str, Any]:
        """The patient's chart (``ehr_db.chart.read_chart``), read in one snapshot."""
        pid = validation.patient_id(patient_id)
        with self._open() as db, read_snapshot(db):
            return read_chart(db, pid, today or datetime.now(UTC).date())

    # -- writes ---------------------------------------------------------------------------

    def _write(self, tool: str, table: str, patient_id: str, record: dict, author: str,
               arguments: dict, time_field: str, not_names: dict[str, str] | None = None,
               idempotency_key: str | None = None, approval: dict | None = None) -> str:
        """Insert ``record`` and its audit row in one transaction. The time is read once the
        write lock is held, so the record and its audit row carry the same instant whatever
        the wait. ``not_names``: fields that may not hold the patient's own name -> what they hold.
        ``idempotency_key`` and ``approval``: see the module docstring."""
        new_id = str(uuid.uuid4())
        key = _idempotency_key(idempotency_key)
        approved = validation.approval(approval)
        result = {"id": new_id} if approved is None else {"id": new_id, "approval": approved}
        audited = json.dumps({"patient_id": patient_id, **arguments}, sort_keys=True)
        with self._open() as db:
            with write_transaction(db):
                if key is not None:
                    done = db.execute("SELECT tool, arguments, record_id FROM write_keys WHERE idempotency_key = ?",
                                      [key]).fetchone()
                    if done is not None:
                        if (done[0], done[1]) != (tool, audited):
                            raise InvalidField("idempotency_key", "was already used for a different write")
                        return done[2]  # performed already: nothing written, nothing audited
                patient = db.execute("SELECT given, family FROM patients WHERE id = ?", [patient_id]).fetchone()
                if patient is None:
                    raise PatientNotFound(patient_id)
                for name, what in (not_names or {}).items():
                    if _is_patient_name(record[name], *patient):
                        raise InvalidField(name, f"is the patient's name, not {what}")
                at = now_iso()
                changes = custody.RowChanges(db)
                changes.before(table, new_id)
                db[table].insert({"id": new_id, "patient_id": patient_id, **record, time_field: at,
                                  "source": "appliance"})
                changes.after(table, new_id)
                custody.append(db, author, tool, {"patient_id": patient_id, **arguments}, result, changes, at=at)
                if key is not None:
                    db["write_keys"].insert({"idempotency_key": key, "tool": tool, "arguments": audited,
                                             "record_id": new_id, "at": at})
            heads.keep(db)
        return new_id

    def prescribe_medication(self, patient_id: str, medication_name: str, dosage: str,
                             frequency: str, notes: str | None = None, *, author: str,
                             idempotency_key: str | None = None, approval: dict | None = None,
                             sig: dict | None = None) -> str:
        """Create an active medication order; returns its id (the first one's, for a repeated key).
        ``sig``: the order's structured sig (``order_changes.sig_columns``), kept beside its text."""
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
            **order_changes.sig_columns(sig),
            "status": "active",
            "intent": "order",
            "author": who,
        }
        return self._write("prescribe_medication", "medication_requests", pid, record, who, args, "authored_at",
                           not_names={"medication_name": "a medication"}, idempotency_key=idempotency_key,
                           approval=approval)

    def add_allergy(self, patient_id: str, substance: str, reaction: str, severity: str | None, *,
                    author: str, idempotency_key: str | None = None, approval: dict | None = None) -> str:
        """Record an active allergy or intolerance; returns its id (the first one's, for a repeated key)."""
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
        }
        return self._write("add_allergy", "allergy_intolerances", pid, record, who, args, "recorded_at",
                           not_names={"substance": "a substance"}, idempotency_key=idempotency_key,
                           approval=approval)

    def save_clinical_note(self, patient_id: str, note_type: str, note_text: str, *, author: str,
                           idempotency_key: str | None = None, approval: dict | None = None) -> str:
        """Save a current clinical note; returns its id (the first one's, for a repeated key)."""
        pid = validation.patient_id(patient_id)
        args = {
            "note_type": validation.note_type(note_type),
            "note_text": validation.required_text("note_text", note_text, 20000, multiline=True),
        }
        who = validation.required_text("author", author, 200)
        record = {
            "note_type": args["note_type"],
            "title": f"{args['note_type'].capitalize()} note",
            "text": args["note_text"],
            "author": who,
            "status": "current",
        }
        return self._write("save_clinical_note", "document_references", pid, record, who, args, "created_at",
                           idempotency_key=idempotency_key, approval=approval)

    # -- the audit chain ------------------------------------------------------------------

    def record_event(self, kind: str, patient_id: str | None, actor: str, details: dict) -> int:
        """Append a non-write event (``audit.EVENT_KINDS``: an approval, rejection, override,
        safety findings, a restore) to the audit chain; returns its seq. ``details`` is a
        JSON object kept as given (up to ``validation.MAX_AUDIT_JSON_CHARS``)."""
        if kind not in audit_chain.EVENT_KINDS:
            raise InvalidField("kind", "must be one of " + ", ".join(audit_chain.EVENT_KINDS))
        pid = validation.patient_id(patient_id) if patient_id is not None else None
        who = validation.required_text("actor", actor, 200)
        if not isinstance(details, dict):
            raise InvalidField("details", "must be a JSON object")
        validation.bounded_json("details", details)
        arguments = {"details": details} if pid is None else {"patient_id": pid, "details": details}
        with self._open() as db:
            with write_transaction(db):
                seq, _ = audit_chain.append(db, who, kind, arguments, None)
            heads.keep(db)
        return seq

    def verify_audit(self, backups: tuple[Path, ...] = ()) -> audit_chain.Verdict:
        """Walk the audit chain, compare its end with the anchor file, every clinical row with
        its recorded digest, and the head with its copies beside the record and in the
        manifests of ``backups`` (files or folders) (read only; ``ehr_db.custody``)."""
        found, notes = heads.copies(self.path, backups, anchor=False)

        def head_check(db):
            problems, more = heads.compare(db, found)
            return problems, notes + more

        with self._open_read() as db:
            return custody.verify_record(db, audit_chain.read_anchor(self.path), head_check)

    def custody_warnings(self) -> list[str]:
        """Start-up's check: each copy of the chain head kept outside the record that shows the
        record older than it, or rewritten (``ehr_db.heads``)."""
        return heads.startup_problems(self.path)

    def audit_trail(self, patient_id: str) -> list[dict]:
        """The audit rows about one patient (writes and events), oldest first."""
        pid = validation.patient_id(patient_id)
        with self._open_read() as db:
            if not audit_chain.is_chained(db):
                raise audit_chain.AuditError("the audit log has no hash chain yet; run `appliance init` to add it")
            return audit_chain.rows_for_patient(db, pid)

    # -- the read log (who read which chart; ``migrations.m006_read_log``) ---------------------

    def log_read(self, actor: str, tool: str, patient_ids: list[str | None], *, terminal: str | None = None,
                 matches: int | None = None) -> None:
        """Record a read: one row per patient it showed (``[None]``: a search that listed no
        one), in one transaction; the query itself is never passed here."""
        who = validation.required_text("actor", actor, 200)
        with self._open() as db, write_transaction(db):
            at = now_iso()
            db.conn.executemany("INSERT INTO read_log (at, actor, terminal, tool, patient_id, matches) "
                                "VALUES (?, ?, ?, ?, ?, ?)",
                                [(at, who, terminal, tool, pid, matches) for pid in patient_ids or [None]])

    def read_trail(self, patient_id: str) -> list[dict]:
        """The reads that showed one patient, oldest first (empty before the read log existed)."""
        pid = validation.patient_id(patient_id)
        with self._open_read() as db:
            if "read_log" not in db.table_names():
                return []
            return [dict(r) for r in db.query("SELECT at, actor, terminal, tool, matches FROM read_log "
                                              "WHERE patient_id = ? ORDER BY id", [pid])]
