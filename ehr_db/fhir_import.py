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
  records an import that changed anything, with the digest of every row it wrote and of what
  each replaced (``ehr_db.custody``).
- An import never quietly changes what clinicians rely on: when it would change a patient's
  identity, an active allergy or an active medication order (``import_checks.differences``),
  or a lab, vital sign or condition the safety gate reads (``gate_inputs``: a value changed in
  place, a newer value that changes the latest, a pregnancy or kidney disease resolved), it
  stops with ``ImportNeedsAcceptance`` listing each difference and writes nothing, unless
  ``accept_changes``; then the audit row keeps each accepted difference, before and after.
- Observation values are stored in the record's unit for their code (``units``, through
  ``fhir_mapping``), and the physiological limits apply to the converted value.
- A file that cannot be read in full (unreadable, not UTF-8, truncated or otherwise not JSON,
  nested too deeply), that is not a supported Bundle, that holds one resource id twice, or
  that brings a value outside physiological limits (``import_checks.value_problem``) raises
  ``BundleError`` naming the problem, and nothing is imported. A resource whose fields have
  the wrong JSON types (a string ``Patient.name``, a list ``Condition.code``; ``fhir_shapes``)
  or that the schema's constraints refuse is skipped, all its rows or none, with the reason in
  the report: never a traceback, never half-stored.
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
from ehr_db import custody, gate_inputs, heads, import_checks, units
from ehr_db.errors import BundleError, ImportNeedsAcceptance
from ehr_db.fhir_mapping import (
    Skip,
    allergy_row,
    condition_row,
    document_row,
    encounter_row,
    medication_row,
    patient_row,
)
from ehr_db.fhir_observations import observation_rows
from ehr_db.fhir_shapes import row_problem, shape_problem
from ehr_db.migrations import migrate

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
# The sender's account of its writes (an appliance's export): reported, not stored.
NOT_STORED = {"Provenance": "not stored (the sender's provenance)", "AuditEvent": "not stored (the sender's audit)"}
VOLATILE_COLUMNS = {"updated_at"}
GATE_TABLES = ("observations", "conditions")  # where the safety gate's chart facts live (gate_inputs)


@dataclass(frozen=True)
class Skipped:
    resource_type: str
    resource_id: str | None
    reason: str


@dataclass
class FhirImportReport:
    """What one import did: row counts per table and every skipped entry with its reason."""

    source: str
    created: Counter = field(default_factory=Counter)
    updated: Counter = field(default_factory=Counter)
    unchanged: Counter = field(default_factory=Counter)
    skipped: list[Skipped] = field(default_factory=list)
    differences: list[import_checks.Difference] = field(default_factory=list)  # accepted, when it ran

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
        if self.differences:
            lines.append(f"  accepted {len(self.differences)} change(s) to what clinicians rely on (audited, "
                         "before and after):")
            lines += [f"    {d.describe()}" for d in self.differences]
        return "\n".join(lines)


def read_bundle(path: Path) -> dict[str, Any]:
    """The parsed Bundle, or ``BundleError`` saying what is wrong with the file."""
    name = Path(path).name
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"cannot read {name} in full: not UTF-8 text (byte {exc.start}); nothing was imported") \
            from None
    except OSError as exc:
        raise BundleError(f"cannot read {name}: {exc.strerror or type(exc).__name__}; nothing was imported") from None
    try:
        bundle = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleError(f"{name} is not valid JSON (line {exc.lineno}): truncated or damaged; nothing was "
                          "imported") from None
    except RecursionError:
        raise BundleError(f"{name} is nested too deeply to read; nothing was imported") from None
    except ValueError:  # a number of more digits than Python converts (thousands)
        raise BundleError(f"{name} holds a number too long to be a value; nothing was imported") from None
    if not isinstance(bundle, dict) or bundle.get("resourceType") != "Bundle":
        raise BundleError(f"{name} is not a FHIR Bundle")
    if bundle.get("type") not in BUNDLE_TYPES:
        raise BundleError(f"unsupported Bundle type {bundle.get('type')!r}; expected one of {', '.join(BUNDLE_TYPES)}")
    if not isinstance(bundle.get("entry", []), list):
        raise BundleError("Bundle.entry is not a list")
    _refuse_duplicates(bundle, name)
    return bundle


def _refuse_duplicates(bundle: dict, name: str) -> None:
    """A resource id twice in one file: which copy should win is not the importer's to guess."""
    seen: dict[tuple[str, str], int] = {}
    for n, entry in enumerate(bundle.get("entry", []), start=1):
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if not isinstance(resource, dict) or not isinstance(resource.get("resourceType"), str):
            continue
        rid = resource.get("id") or _id_from_full_url(entry.get("fullUrl"))
        if not isinstance(rid, str) or not rid:
            continue
        key = (resource["resourceType"], rid)
        if key in seen:
            raise BundleError(f"{name} holds {key[0]} {rid} twice (entries {seen[key]} and {n}); nothing was imported")
        seen[key] = n


def _id_from_full_url(full_url: Any) -> str | None:
    if not full_url or not isinstance(full_url, str):
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


class _Run:
    """One import's state: its rows' digests (``custody``), the differences it would make
    (``import_checks``) and the rows written so far (a row id twice is refused)."""

    def __init__(self, db: Database):
        self.changes = custody.RowChanges(db)
        self.differences: list[import_checks.Difference] = []
        self.written: set[tuple[str, str]] = set()
        self.gate = gate_inputs.Guard()


def _upsert(db: Database, table: str, row: dict, run: _Run) -> str:
    if (table, row["id"]) in run.written:
        raise BundleError(f"two resources in the file give {table} the row {row['id']}; nothing was imported")
    run.written.add((table, row["id"]))
    changes = run.changes
    existing = list(db.query(f"SELECT * FROM {table} WHERE id = ?", [row["id"]]))
    if not existing:
        if table == "patients":
            run.gate.created.add(row["id"])
            row = {**row, "updated_at": now_iso()}
        elif table in GATE_TABLES:
            run.gate.touch(db, row.get("patient_id"))
        changes.before(table, row["id"])
        db[table].insert(row)
        changes.after(table, row["id"])
        return "created"
    if all(existing[0].get(k) == v for k, v in row.items() if k not in VOLATILE_COLUMNS):
        return "unchanged"
    run.differences += import_checks.differences(table, existing[0], row)
    if table in GATE_TABLES:
        run.gate.touch(db, existing[0].get("patient_id"), row.get("patient_id"))
    if table == "patients":
        row = {**row, "updated_at": now_iso()}
    changes.before(table, row["id"])
    db[table].update(row["id"], row)
    changes.after(table, row["id"])
    return "updated"


def import_fhir_bundle(db_path: Path | str, bundle_path: Path | str, *, actor: str = "fhir-import",
                       accept_changes: bool = False) -> FhirImportReport:
    """Import one FHIR Bundle file into the EHR at ``db_path`` (migrated first); see the module
    docstring for what stops it (``BundleError``, ``ImportNeedsAcceptance``)."""
    bundle = read_bundle(Path(bundle_path))
    report = FhirImportReport(source=Path(bundle_path).name)
    with opened(db_path) as db:
        migrate(db)
        with write_transaction(db):
            run = _Run(db)
            _import(db, bundle, report, run)
            run.differences += run.gate.differences(db)
            if run.differences and not accept_changes:
                raise ImportNeedsAcceptance(report.source, run.differences)  # rolls the whole import back
            report.differences = run.differences
            if report.changed:
                arguments = {"bundle": report.source}
                if run.differences:
                    arguments["accepted_changes"] = [d.to_json() for d in run.differences]
                custody.append(db, actor, "fhir_import", arguments,
                               {"created": sum(report.created.values()), "updated": sum(report.updated.values()),
                                "skipped": len(report.skipped)}, run.changes)
        heads.keep(db)
    return report


def _import(db: Database, bundle: dict, report: FhirImportReport, run: _Run) -> None:
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
        elif rtype in NOT_STORED:
            report.skipped.append(Skipped(rtype, rid, NOT_STORED[rtype]))
        else:
            report.skipped.append(Skipped(rtype, rid, "unsupported resource type"))
    medications = {k: v for k, v in index.resources.items() if v["resourceType"] == "Medication"}
    for rtype, table in TABLES.items():
        for resource in pending[rtype]:
            try:
                rows = _checked_rows(rtype, resource, index, medications)
                outcomes = _upsert_all(db, table, rows, run)
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
    _refuse_implausible(rtype, resource, rows)
    return rows


def _refuse_implausible(rtype: str, resource: dict, rows: list[dict]) -> None:
    """``BundleError`` (the whole import) for a number no patient could have (``import_checks``)."""
    where = f"{rtype} {resource['id']}"
    if rtype == "Observation":
        field = "valueQuantity.value" if not resource.get("component") else "component valueQuantity.value"
        quantity = resource.get("valueQuantity") if not resource.get("component") else None
        converted = (units.conversion(rows[0].get("loinc_code"), quantity.get("unit"), quantity.get("code"))
                     if isinstance(quantity, dict) and rows else None)
        if converted is not None:
            field += f" (given in {converted.given}, converted to {converted.stored})"
        for row in rows:
            problems = [import_checks.value_problem(field, row.get("value_num"), row.get("loinc_code"), row.get("unit")),
                        import_checks.value_problem("referenceRange.low.value", row.get("ref_low")),
                        import_checks.value_problem("referenceRange.high.value", row.get("ref_high"))]
            problem = next((p for p in problems if p), None)
            if problem:
                raise BundleError(f"{where}: {problem}; nothing was imported")
    elif rtype == "MedicationRequest":
        for n, dosage in enumerate(resource.get("dosageInstruction") or []):
            for m, dose in enumerate((dosage or {}).get("doseAndRate") or [] if isinstance(dosage, dict) else []):
                quantity = dose.get("doseQuantity") if isinstance(dose, dict) else None
                value = quantity.get("value") if isinstance(quantity, dict) else None
                problem = import_checks.value_problem(
                    f"dosageInstruction[{n}].doseAndRate[{m}].doseQuantity.value", value)
                if problem:
                    raise BundleError(f"{where}: {problem}; nothing was imported")


def _upsert_all(db: Database, table: str, rows: list[dict], run: _Run) -> list[str]:
    """Upsert a resource's rows together: all of them, or (``Skip``) none."""
    db.execute("SAVEPOINT resource")
    mark, found, outcomes = run.changes.mark(), len(run.differences), []
    try:
        for row in rows:
            outcomes.append(_upsert(db, table, row, run))
    except (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError):
        db.execute("ROLLBACK TO resource")
        db.execute("RELEASE resource")
        run.changes.undo(mark)
        del run.differences[found:]
        run.written -= {(table, r["id"]) for r in rows[:len(outcomes) + 1]}  # each new to this run
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
