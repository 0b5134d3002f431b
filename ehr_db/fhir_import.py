"""Import FHIR R4 Bundles (the shape Synthea writes) into the EHR.

Invariants:
- Supported: Bundle of type transaction, batch or collection; resources Patient, Encounter,
  Condition, MedicationRequest, AllergyIntolerance, Observation (laboratory and vital-signs)
  and DocumentReference (inline text). Medication resources are read only to name
  MedicationRequests that reference them. Everything else is skipped and reported.
- Resources keep their FHIR id (Synthea UUIDs) and are upserted by it: importing the same
  bundle twice changes nothing (rows are compared before writing; an unchanged row is not
  rewritten), and the report counts created, updated and unchanged rows per table.
- References may be ``urn:uuid:<id>`` (resolved through the bundle's fullUrls),
  ``Type/<id>`` or an absolute URL ending in ``Type/<id>``; a reference to a patient that is
  neither in the bundle nor already in the database skips the resource ("unknown reference").
- The whole import is one transaction: a crash leaves the database as it was. One audit row
  records an import that changed anything.
- A file that is unreadable, not JSON, or not a supported Bundle raises ``BundleError``. A
  resource whose fields have the wrong JSON types (a string ``Patient.name``, a list
  ``Condition.code``; ``fhir_shapes``) or that the schema's constraints refuse is skipped, all
  its rows or none, with the reason in the report: never a traceback, never half-stored.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from common.sqlite import now_iso, opened, write_transaction
from ehr_db import audit as audit_chain
from ehr_db.errors import BundleError
from ehr_db.fhir_mapping import (
    Skip,
    allergy_row,
    condition_row,
    document_row,
    encounter_row,
    medication_row,
    observation_rows,
    patient_row,
)
from ehr_db.fhir_shapes import row_problem, shape_problem
from ehr_db.migrations import migrate
from ehr_db.repository import audit

BUNDLE_TYPES = ("transaction", "batch", "collection")
# Import order: targets of references before the resources that point at them.
TABLES = {
    "Patient": "patients",
    "Encounter": "encounters",
    "Condition": "conditions",
    "MedicationRequest": "medication_requests",
    "AllergyIntolerance": "allergy_intolerances",
    "Observation": "observations",
    "DocumentReference": "document_references",
}
LOOKUP_ONLY = {"Medication"}
VOLATILE_COLUMNS = {"updated_at"}


@dataclass(frozen=True)
class Skipped:
    resource_type: str
    resource_id: str | None
    reason: str


@dataclass
class ImportReport:
    """What one import did: row counts per table and every skipped entry with its reason."""

    source: str
    created: Counter = field(default_factory=Counter)
    updated: Counter = field(default_factory=Counter)
    unchanged: Counter = field(default_factory=Counter)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return sum(self.created.values()) + sum(self.updated.values())

    def skipped_by_reason(self) -> dict[str, Counter]:
        """reason -> Counter of resource types."""
        out: dict[str, Counter] = {}
        for s in self.skipped:
            out.setdefault(s.reason, Counter())[s.resource_type] += 1
        return out

    def summary(self) -> str:
        lines = [f"FHIR import of {self.source}:"]
        for table in sorted(set(self.created) | set(self.updated) | set(self.unchanged)):
            lines.append(
                f"  {table}: {self.created[table]} created, {self.updated[table]} updated, "
                f"{self.unchanged[table]} unchanged"
            )
        if not (self.created or self.updated or self.unchanged):
            lines.append("  nothing imported")
        for reason, types in sorted(self.skipped_by_reason().items()):
            detail = ", ".join(f"{t} {n}" for t, n in sorted(types.items()))
            lines.append(f"  skipped {sum(types.values())} ({reason}): {detail}")
        return "\n".join(lines)


def read_bundle(path: Path) -> dict[str, Any]:
    """The parsed Bundle, or ``BundleError`` saying what is wrong with the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"cannot read {Path(path).name}: {type(exc).__name__}") from None
    try:
        bundle = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleError(f"{Path(path).name} is not valid JSON (line {exc.lineno})") from None
    if not isinstance(bundle, dict) or bundle.get("resourceType") != "Bundle":
        raise BundleError(f"{Path(path).name} is not a FHIR Bundle")
    if bundle.get("type") not in BUNDLE_TYPES:
        raise BundleError(f"unsupported Bundle type {bundle.get('type')!r}; expected one of {', '.join(BUNDLE_TYPES)}")
    if not isinstance(bundle.get("entry", []), list):
        raise BundleError("Bundle.entry is not a list")
    return bundle


def _id_from_full_url(full_url: str | None) -> str | None:
    if not full_url:
        return None
    if full_url.startswith("urn:uuid:"):
        return full_url[len("urn:uuid:"):]
    return full_url.rstrip("/").rsplit("/", 1)[-1]


class _Index:
    """The bundle's resources by fullUrl and Type/id, plus patients already in the database."""

    def __init__(self, db: Database):
        self.db = db
        self.by_url: dict[str, tuple[str, str]] = {}
        self.resources: dict[str, dict] = {}
        self.imported: dict[str, set[str]] = {t: set() for t in TABLES}

    def add(self, full_url: str | None, resource: dict) -> None:
        rtype, rid = resource["resourceType"], resource["id"]
        for key in filter(None, (full_url, f"{rtype}/{rid}")):
            self.by_url[key] = (rtype, rid)
            self.resources[key] = resource

    def resolve(self, ref: Any, target: str) -> str | None:
        """The id of ``target`` that ``ref`` points at, if it exists (in bundle or database)."""
        text = ref.get("reference") if isinstance(ref, dict) else None
        if not text:
            return None
        found = self.by_url.get(text)
        if found is None and "/" in text and not text.startswith("urn:"):
            rtype, _, rid = text.rstrip("/").rpartition("/")
            found = (rtype.rsplit("/", 1)[-1], rid)
        if found is None or found[0] != target:
            return None
        rid = found[1]
        if rid in self.imported[target]:
            return rid
        row = self.db.execute(f"SELECT 1 FROM {TABLES[target]} WHERE id = ?", [rid]).fetchone()
        return rid if row else None


def _upsert(db: Database, table: str, row: dict) -> str:
    existing = list(db.query(f"SELECT * FROM {table} WHERE id = ?", [row["id"]]))
    if not existing:
        if table == "patients":
            row = {**row, "updated_at": now_iso()}
        db[table].insert(row)
        return "created"
    if all(existing[0].get(k) == v for k, v in row.items() if k not in VOLATILE_COLUMNS):
        return "unchanged"
    if table == "patients":
        row = {**row, "updated_at": now_iso()}
    db[table].update(row["id"], row)
    return "updated"


def import_fhir_bundle(db_path: Path | str, bundle_path: Path | str, *, actor: str = "fhir-import") -> ImportReport:
    """Import one FHIR Bundle file into the EHR at ``db_path`` (migrated first)."""
    bundle = read_bundle(Path(bundle_path))
    report = ImportReport(source=Path(bundle_path).name)
    with opened(db_path) as db:
        migrate(db)
        with write_transaction(db):
            _import(db, bundle, report)
            if report.changed:
                audit(db, actor, "fhir_import", {"bundle": report.source},
                      {"created": sum(report.created.values()), "updated": sum(report.updated.values()),
                       "skipped": len(report.skipped)})
        audit_chain.update_anchor(db)
    return report


def _import(db: Database, bundle: dict, report: ImportReport) -> None:
    index = _Index(db)
    pending: dict[str, list[dict]] = {t: [] for t in TABLES}
    for entry in bundle.get("entry", []):
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if not isinstance(resource, dict) or not isinstance(resource.get("resourceType"), str):
            report.skipped.append(Skipped("(entry)", None, "entry without a resource"))
            continue
        rtype = resource["resourceType"]
        rid = resource.get("id") or _id_from_full_url(entry.get("fullUrl"))
        if not rid:
            report.skipped.append(Skipped(rtype, None, "missing id"))
            continue
        resource = {**resource, "id": rid}
        index.add(entry.get("fullUrl"), resource)
        if rtype in TABLES:
            pending[rtype].append(resource)
        elif rtype in LOOKUP_ONLY:
            report.skipped.append(Skipped(rtype, rid, "not stored (used to name medication orders)"))
        else:
            report.skipped.append(Skipped(rtype, rid, "unsupported resource type"))
    medications = {k: v for k, v in index.resources.items() if v["resourceType"] == "Medication"}
    for rtype, table in TABLES.items():
        for resource in pending[rtype]:
            try:
                rows = _checked_rows(rtype, resource, index, medications)
                outcomes = _upsert_all(db, table, rows)
            except Skip as why:
                report.skipped.append(Skipped(rtype, resource["id"], str(why)))
                continue
            for outcome in outcomes:
                getattr(report, outcome)[table] += 1
            index.imported[rtype].add(resource["id"])


def _checked_rows(rtype: str, resource: dict, index: _Index, medications: dict) -> list[dict]:
    """The resource's rows, or ``Skip`` naming what is malformed (``fhir_shapes``)."""
    problem = shape_problem(rtype, resource)
    if problem:
        raise Skip(f"malformed: {problem}")
    try:
        rows = _rows(rtype, resource, index, medications)
    except (AttributeError, TypeError, KeyError, ValueError, IndexError):
        raise Skip(f"malformed: {rtype} has a field of an unexpected JSON type") from None
    for row in rows:
        problem = row_problem(rtype, row)
        if problem:
            raise Skip(f"malformed: {problem}")
    return rows


def _upsert_all(db: Database, table: str, rows: list[dict]) -> list[str]:
    """Upsert a resource's rows together: all of them, or (``Skip``) none."""
    db.execute("SAVEPOINT resource")
    try:
        outcomes = [_upsert(db, table, row) for row in rows]
    except (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError):
        db.execute("ROLLBACK TO resource")
        db.execute("RELEASE resource")
        raise Skip("rejected by the record's constraints") from None
    db.execute("RELEASE resource")
    return outcomes


def _rows(rtype: str, resource: dict, index: _Index, medications: dict) -> list[dict]:
    resolve = index.resolve
    if rtype == "Patient":
        return [patient_row(resource, resolve)]
    if rtype == "Encounter":
        return [encounter_row(resource, resolve)]
    if rtype == "Condition":
        return [condition_row(resource, resolve)]
    if rtype == "MedicationRequest":
        return [medication_row(resource, resolve, medications)]
    if rtype == "AllergyIntolerance":
        return [allergy_row(resource, resolve)]
    if rtype == "Observation":
        return observation_rows(resource, resolve)
    return [document_row(resource, resolve)]
