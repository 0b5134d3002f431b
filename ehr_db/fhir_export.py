"""Export what the appliance wrote as one signed FHIR R4 transaction Bundle.

Invariants:
- A write is an audit row (``outcome`` success) of any tool but the record's own loads
  (``NOT_WRITES``: imports, demo loads, the custody baseline, restores) that wrote rows of the
  exported tables, as its ledger entries say (``ehr_db.custody``; an older row without entries
  names its record in ``result.id``). The export carries each written row as it stands now,
  the Patient it needs, and per write one Provenance and one AuditEvent
  (``fhir_export_resources``). Everything is read in one snapshot, so a write made meanwhile is
  in the export whole or not at all.
- The window: every write (no option), the writes at or after ``since`` (an ISO date or time,
  UTC when it has no offset), or the writes after the cursor (``since_export``). ``patient``
  keeps the writes of that patient only.
- Entries: a Patient is a conditional create (``ifNoneExist`` on ``PATIENT_ID_SYSTEM``), so a
  receiving server that has the patient uses it; everything else is an update by its id, so
  sending the same export twice changes nothing there.
- The bundle is validated with ``fhir.resources`` (R4B models) before anything is written; one
  that does not validate raises ``ExportError`` and nothing is written. The file is then
  written with its signature and manifest (``signing.write_signed``: all or nothing).
- The cursor (a JSON file in the data home) records the record's id, the last seq the export
  covered and that row's hash; it moves only after a successful export of every patient whose
  window began at the cursor (``since_export``, or no window), and a cursor that does not match
  the record (replaced or restored) is refused rather than guessed around.
- Nothing here logs; the report names counts, never patient data.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlite_utils import Database

from common.sqlite import now_iso, opened, read_snapshot
from ehr_db import fhir_export_resources as fr
from ehr_db import heads, signing
from ehr_db.custody import BASELINE_TOOL
from ehr_db.errors import EhrError

NOT_WRITES = ("fhir_import", "load_demo_patients", "refresh_demo_patients", BASELINE_TOOL, "restore")
EXPORTED = {"medication_requests": "MedicationRequest", "allergy_intolerances": "AllergyIntolerance",
            "document_references": "DocumentReference"}
CURSOR_FORMAT = "appliance-ehr-export-cursor/1"
# The column naming the order a change replaced, where the record has it.
REPLACES_COLUMNS = ("replaces_id",)


class ExportError(EhrError):
    """An export could not be made (the message says why; nothing was written)."""


@dataclass(frozen=True)
class Write:
    """One audited write: its audit row's facts and the exported rows it wrote."""

    seq: int
    at: str
    actor: str
    tool: str
    row_hash: str
    approval: dict | None
    rows: tuple[tuple[str, str, bool], ...]  # (table, row id, created)


@dataclass
class ExportReport:
    path: Path
    manifest: Path
    signature: Path
    writes: int
    patients: int
    resources: dict = field(default_factory=dict)  # resource type -> count
    window: dict = field(default_factory=dict)
    sha256: str = ""
    key_fingerprint: str = ""
    cursor_advanced: bool = False

    def summary(self) -> str:
        kinds = ", ".join(f"{n} {t}" for t, n in sorted(self.resources.items())) or "no resources"
        lines = [f"export written to {self.path}: {self.writes} write(s) of {self.patients} patient(s) ({kinds})",
                 f"  window: {self.window.get('described')}",
                 f"  signed with key {self.key_fingerprint[:16]}...; sha256 {self.sha256[:16]}...",
                 f"  signature: {self.signature.name}; manifest: {self.manifest.name}"]
        if self.cursor_advanced:
            lines.append(f"  the next `ehr export --since-export` starts after seq {self.window.get('through_seq')}")
        return "\n".join(lines)


def _since_text(value: str) -> str:
    """``--since`` as the audit log's own time format (UTC, to the second)."""
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ExportError(f"--since {value!r} is not a date (YYYY-MM-DD) or an ISO date and time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).replace(microsecond=0).isoformat()


# -- the cursor --------------------------------------------------------------------------------
def read_cursor(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        raise ExportError(f"the export cursor {path.name} cannot be read; move it aside to export everything, "
                          "or use --since DATE") from None
    if not isinstance(data, dict) or data.get("format") != CURSOR_FORMAT or not isinstance(data.get("seq"), int):
        raise ExportError(f"the export cursor {path.name} is not one this version wrote; move it aside, or use "
                          "--since DATE")
    return data


def _write_cursor(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, signing.PRIVATE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _cursor_seq(db: Database, cursor: dict | None, record_id: str) -> int:
    if cursor is None:
        return 0
    row = db.execute("SELECT row_hash FROM audit_log WHERE seq = ?", [cursor["seq"]]).fetchone()
    if cursor.get("record_id") != record_id or (cursor["seq"] and (row is None or row[0] != cursor.get("hash"))):
        raise ExportError("the export cursor does not match this record (it was replaced or restored since the "
                          "last export); export with --since DATE, or move the cursor aside to export everything")
    return cursor["seq"]


# -- reading the writes ------------------------------------------------------------------------
def _writes(db: Database, after_seq: int, since: str | None) -> list[Write]:
    marks = ", ".join("?" for _ in NOT_WRITES)
    rows = db.execute(
        f"SELECT seq, at, actor, tool, result, row_hash FROM audit_log WHERE outcome = 'success' AND seq > ? "
        f"AND at >= ? AND tool NOT IN ({marks}) ORDER BY seq", [after_seq, since or "", *NOT_WRITES]).fetchall()
    has_ledger = "row_digests" in db.table_names()
    writes = []
    for seq, at, actor, tool, result, row_hash in rows:
        try:
            result = json.loads(result) if result else {}
        except ValueError:
            result = {}
        result = result if isinstance(result, dict) else {}
        written: list[tuple[str, str, bool]] = []
        if has_ledger:
            for table, row_id, before, after in db.execute(
                    "SELECT tbl, row_id, before, digest FROM row_digests WHERE seq = ? ORDER BY tbl, row_id", [seq]):
                if table in EXPORTED and after is not None:
                    written.append((table, row_id, before is None))
        if not written and isinstance(result.get("id"), str) and "rows" not in result:
            for table in EXPORTED:  # a write from before the ledger: its result names the record
                if db.execute(f"SELECT 1 FROM {table} WHERE id = ?", [result["id"]]).fetchone():
                    written.append((table, result["id"], True))
        if written:
            approval = result.get("approval") if isinstance(result.get("approval"), dict) else None
            writes.append(Write(seq, at, actor, tool, row_hash, approval, tuple(written)))
    return writes


def _structured(row: dict) -> dict:
    """The order's own sig fields, where the record has them (as-needed, its indication, the
    maximum, the duration), for ``fhir_export_resources.dosage``."""
    out: dict = {}
    if row.get("as_needed") is not None:
        out["as_needed"] = bool(row["as_needed"])
    if row.get("as_needed_for"):
        out["as_needed_for"] = str(row["as_needed_for"])
    for name in ("max_per_period",):
        if row.get(name):
            out["max_text"] = f"max {row[name]}" if not str(row[name]).lower().startswith("max") else str(row[name])
            out["max_per_period"] = _ratio(str(row[name]))
    for name in ("duration_days",):
        if isinstance(row.get(name), (int, float)) and row[name] > 0:
            out["duration_days"] = row[name]
    for name in ("duration", "duration_text"):
        if row.get(name):
            out["duration_text"] = str(row[name])
            found = re.search(r"(\d+)\s*(day|week|wk|d\b)", str(row[name]), re.IGNORECASE)
            if found and "duration_days" not in out:
                out["duration_days"] = int(found.group(1)) * (1 if found.group(2).lower().startswith("d") else 7)
    return out


def _ratio(text: str) -> dict | None:
    """maxDosePerPeriod from "4 g/day", "max 12/day", "3000 mg per 24 h"; None otherwise."""
    found = re.search(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*(?:/|per)\s*(\d+)?\s*(day|d|24\s*h|h|hours?|week|wk)",
                      text, re.IGNORECASE)
    if not found:
        return None
    value = float(found.group(1))
    period = found.group(4).lower().replace(" ", "")
    unit, count = {"day": ("d", 1), "d": ("d", 1), "24h": ("h", 24), "h": ("h", 1), "hour": ("h", 1),
                   "hours": ("h", 1), "week": ("wk", 1), "wk": ("wk", 1)}[period]
    numerator = {"value": int(value) if value.is_integer() else value}
    if found.group(2):
        numerator["unit"] = found.group(2)
    return {"numerator": numerator, "denominator": {"value": int(found.group(3) or count), "unit": unit,
                                                    "system": "http://unitsofmeasure.org", "code": unit}}


def build_bundle(db: Database, writes: list[Write], record_id: str, progress: Callable[[int, int], None]) -> dict:
    """The transaction Bundle of ``writes`` (module docstring), read from ``db``."""
    rows: dict[tuple[str, str], dict] = {}
    for write in writes:
        for table, row_id, _ in write.rows:
            if (table, row_id) not in rows:
                rows[(table, row_id)] = dict(next(db.query(f"SELECT * FROM {table} WHERE id = ?", [row_id])))
    patients = {pid: dict(next(db.query("SELECT * FROM patients WHERE id = ?", [pid])))
                for pid in sorted({r["patient_id"] for r in rows.values()})}
    entries = []
    for pid, row in patients.items():
        entries.append({"fullUrl": fr.full_url("Patient", pid), "resource": fr.patient(row),
                        "request": {"method": "POST", "url": "Patient",
                                    "ifNoneExist": f"identifier={fr.PATIENT_ID_SYSTEM}|{pid}"}})
    urls: dict[tuple[str, str], str] = {}
    for table, row_id in rows:
        rtype = EXPORTED[table]
        urls[(table, row_id)] = fr.full_url(rtype, row_id)
    for (table, row_id), row in rows.items():
        rtype, subject = EXPORTED[table], fr.full_url("Patient", row["patient_id"])
        demo = patients[row["patient_id"]].get("source") == "demo"
        if table == "medication_requests":
            prior = next((row[c] for c in REPLACES_COLUMNS if row.get(c)), None)
            replaces = urls.get((table, prior)) or (f"MedicationRequest/{prior}" if prior else None)
            resource = fr.medication_request(row, subject, demo, _structured(row), replaces)
        elif table == "allergy_intolerances":
            resource = fr.allergy(row, subject, demo)
        else:
            resource = fr.document(row, subject, demo)
        entries.append({"fullUrl": urls[(table, row_id)], "resource": resource,
                        "request": {"method": "PUT", "url": f"{rtype}/{row_id}"}})
    for n, write in enumerate(writes, start=1):
        targets = [urls[(t, i)] for t, i, _ in write.rows]
        created = all(c for _, _, c in write.rows)
        subject = fr.full_url("Patient", rows[write.rows[0][:2]]["patient_id"])
        for resource in (fr.provenance(write, record_id, targets, created),
                         fr.audit_event(write, record_id, targets, subject, created)):
            entries.append({"fullUrl": f"urn:uuid:{resource['id']}", "resource": resource,
                            "request": {"method": "PUT", "url": f"{resource['resourceType']}/{resource['id']}"}})
        progress(n, len(writes))
    return {"resourceType": "Bundle", "id": fr.derived_id(record_id, "bundle", writes[-1].seq if writes else 0),
            "type": "transaction", "timestamp": now_iso(), "entry": entries}


def validate(bundle: dict) -> None:
    """``ExportError`` naming the first field that FHIR R4 (``fhir.resources``' R4B models) refuses."""
    from fhir.resources.R4B.bundle import Bundle
    from pydantic import ValidationError

    try:
        Bundle.model_validate(bundle)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ExportError(f"the export does not validate as FHIR R4 ({where}: {first.get('msg', 'invalid')}); "
                          "nothing was written") from None


# -- the export --------------------------------------------------------------------------------
def export_bundle(db_path: Path, out: Path, key_path: Path, cursor_path: Path, *, since: str | None = None,
                  since_export: bool = False, patient: str | None = None,
                  progress: Callable[[int, int], None] | None = None) -> ExportReport:
    """Export the writes of the window to ``out`` (a new file, or a folder); see the module docstring."""
    if since is not None and since_export:
        raise ExportError("give --since DATE or --since-export, not both")
    since_at = _since_text(since) if since is not None else None
    key = signing.load_private(key_path)
    out = Path(out)
    if out.is_dir():
        out = out / f"ehr-export-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    if not out.parent.is_dir():
        raise ExportError(f"the folder {out.parent} does not exist")
    if not Path(db_path).exists():
        raise ExportError("the health record database has not been created; run `appliance init`")
    cursor = read_cursor(cursor_path) if since_export else None
    with opened(db_path, read_only=True) as db, read_snapshot(db):
        facts = heads.facts(db)
        if facts is None or facts.record_id is None:
            raise ExportError("the record has no audit chain yet; run `appliance init`")
        after = _cursor_seq(db, cursor, facts.record_id)
        if patient is not None and db.execute("SELECT 1 FROM patients WHERE id = ?", [patient]).fetchone() is None:
            raise ExportError(f"patient {patient} is not in the record")
        writes = _writes(db, after, since_at)
        if patient is not None:
            writes = [w for w in writes if _patient_of(db, w) == patient]
        bundle = build_bundle(db, writes, facts.record_id, progress or (lambda done, total: None))
        head_seq, head_hash = facts.head_seq, facts.head_hash
        record_id = facts.record_id
    validate(bundle)
    described = (f"after seq {after} (the last export)" if since_export and cursor else
                 "everything (no earlier export)" if since_export else
                 f"from {since_at}" if since_at else "everything the appliance wrote")
    window = {"since": since_at, "after_seq": after, "through_seq": head_seq, "patient": patient,
              "described": described + (f", patient {patient}" if patient else "")}
    resources = Counter(e["resource"]["resourceType"] for e in bundle["entry"])
    payload = json.dumps(bundle, indent=1, ensure_ascii=False).encode("utf-8")
    manifest = signing.write_signed(out, payload, key, {
        "record_id": record_id, "exported_at": bundle["timestamp"], "window": window,
        "writes": len(writes), "resources": dict(resources)})
    advance = patient is None and since_at is None
    if advance:
        _write_cursor(cursor_path, {"format": CURSOR_FORMAT, "record_id": record_id, "seq": head_seq,
                                    "hash": head_hash, "exported_at": bundle["timestamp"], "file": out.name})
    return ExportReport(path=out, manifest=signing.manifest_path(out), signature=signing.signature_path(out),
                        writes=len(writes), patients=sum(1 for e in bundle["entry"]
                                                         if e["resource"]["resourceType"] == "Patient"),
                        resources=dict(resources), window=window, sha256=manifest["sha256"],
                        key_fingerprint=manifest["signature"]["key_fingerprint"], cursor_advanced=advance)


def _patient_of(db: Database, write: Write) -> str | None:
    table, row_id, _ = write.rows[0]
    found = db.execute(f"SELECT patient_id FROM {table} WHERE id = ?", [row_id]).fetchone()
    return found[0] if found else None


# -- checking an export ------------------------------------------------------------------------
@dataclass
class ExportCheck:
    """``verify_export``'s verdict: ``problem`` is None when the file verifies."""

    path: Path
    problem: str | None
    sha256: str | None
    key_fingerprint: str | None
    writes: int | None = None
    resources: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.problem is None

    def summary(self) -> str:
        if not self.ok:
            return f"export {self.path} does NOT verify: {self.problem}"
        return (f"export {self.path} verified: sha256 matches its manifest, signature good (key "
                f"{(self.key_fingerprint or '')[:16]}...), {self.writes} write(s)")


def verify_export(path: Path, public_key_path: Path) -> ExportCheck:
    """Check an export against its manifest and its signature with the public key at
    ``public_key_path`` (``signing.verify_signed``); only reads."""
    key = signing.load_public(public_key_path)
    check = signing.verify_signed(Path(path), key)
    manifest = check.manifest
    return ExportCheck(path=Path(path), problem=check.problem, sha256=check.sha256,
                       key_fingerprint=check.key_fingerprint,
                       writes=manifest.get("writes") if isinstance(manifest.get("writes"), int) else None,
                       resources=manifest.get("resources") if isinstance(manifest.get("resources"), dict) else {})
