"""MCP server 'ehr': the local electronic health record, read and written by the agent.

Invariants:
- Each agent tool is its record's (``contracts.catalogue``): the function takes the record's
  argument model and ``serving.serves`` makes the MCP signature from it (same names, order,
  types, bounds; every parameter required, nullable where it may be empty), plus the write
  tools' optional ``idempotency_key`` (``contracts.IDEMPOTENCY_KEY``), which the agent's code
  sets and the model never sees: a repeated key is performed once; and their optional
  ``approval`` (``contracts.APPROVAL``: approval or override, who decided, the safety report),
  also set by code after the approver said yes, which the record keeps in the write's own audit
  row. One more tool, ``record_audit_event`` (``contracts.AUDIT_EVENT_TOOL``), is not the
  model's: the agent's approval code records rejected writes (and other decisions) with it on
  the record's hash-chained audit log.
- Faults no retry can fix (a missing, damaged, read-only or full database) are
  ``permanent_failure`` with one clear sentence; a busy database is ``service_unavailable``.
  A failed write's message says the record was not changed (its transaction rolled back).
  At start-up the database is opened once (integrity check, migrations); a fault is one line
  on stderr, and the server still serves, reporting the fault per call.
- Every expected failure is a ``ToolError`` whose message is ``"<error_type>: <text>"``
  (``tool_errors.tool_error_message``); the text is clinician-safe and carries no patient data
  beyond what the caller sent. Anything unexpected is masked (``mask_error_details=True``).
- Logs name the tool and the outcome, never arguments or record contents.
- The tools use the database path given to ``configure`` (tests; ``main`` passes ``--db`` or
  ``common.locations.ehr_db_path()``); the schema is migrated at the first tool call, once per
  process. A server given no path reports the record not set up.
- Writes and reads are attributed per request (``callers.caller``). Over streamable HTTP with
  terminal tokens (``mcp_servers.access``) the author is the token's account, whatever any
  header says. On a loopback HTTP server with no token issued it is the request's
  ``X-Appliance-User`` header (percent-encoded UTF-8, sent by ``appliance.tools.mcp_client``
  from the terminal's ``$APPLIANCE_USER``): a claim, not an authentication. Over stdio (one
  server per terminal), and for an HTTP client that sends no such header, it is the server's
  ``$APPLIANCE_USER``, else the OS account name (``common.operator``). The repository stores
  the author and time with each record and its audit row.
- The server enforces what a terminal asks for. With a terminal token a write needs an
  approval, and the approval's clinician is the token's account (a request cannot name another
  approver); a rejection recorded with ``record_audit_event`` names that account too.
  ``record_audit_event`` takes only rejections, from anyone. A host that runs the safety gate (``set_prescription_check``, filled by
  ``appliance serve``) checks every prescription against the chart before writing: a blocking
  report is refused unless the approval overrides it with a reason, and the host's report
  (not the client's) goes into the write's audit row; a refusal is recorded as a rejection.
- Every read is logged (``EhrRepository.log_read``: who, terminal, tool, patient, when; a
  search as the patients it listed, never its text) before its answer is returned: a read
  that cannot be logged is not answered.

This module declares the tools; its parts: ``callers`` (who calls, the approval kept),
``faults`` (failures as contract ToolErrors), ``host_gate`` (the host's safety gate before a
prescribing write), ``order_tools`` (the order changes).

Run: ``python -m mcp_servers.ehr [--db PATH] [--http HOST:PORT]`` (stdio by default).
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError

from common.sqlite import DatabaseCorrupt
from ehr_db.errors import DatabaseNotReady, EhrError
from ehr_db.name_match import closest_sentence
from ehr_db.repository import EhrRepository
from mcp_servers.contracts import (
    ALLERGY,
    AUDIT_EVENT_TOOL,
    CHANGE,
    NOTE,
    PRESCRIBE,
    STATUS,
    AddAllergyArgs,
    ApprovalRecord,
    AuditEventKind,
    ChangeMedicationArgs,
    ClinicalNoteArgs,
    MedicationStatusArgs,
    PatientChartArgs,
    PatientId,
    PatientSearchArgs,
    PrescribeMedicationArgs,
    RejectionDetails,
    SigRecord,
    tool_record,
)
from mcp_servers.ehr import callers, order_tools
from mcp_servers.ehr.callers import Caller
from mcp_servers.ehr.faults import as_tool_errors, sqlite_fault
from mcp_servers.ehr.host_gate import (
    PrescriptionCheck,
    check_prescription,
    override_password,
)
from mcp_servers.serving import ArgumentErrors, serve, serves
from mcp_servers.tool_errors import tool_error_message

log = logging.getLogger("mcp_servers.ehr.server")

WRITE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}


mcp = FastMCP(
    "ehr",
    instructions=(
        "Local electronic health record. Find patients by name, read a patient's chart by "
        "patient ID, and write prescriptions, allergies and clinical notes."
    ),
    mask_error_details=True,
    middleware=[ArgumentErrors()],
)

_lock = threading.Lock()
_db_path: Path | None = None
_repo: EhrRepository | None = None


def configure(db_path: Path | str | None) -> None:
    """Point the server at ``db_path`` (None: none; its tools then report the record not set up)."""
    global _db_path, _repo
    with _lock:
        _db_path = Path(db_path) if db_path is not None else None
        _repo = None


def _repository() -> EhrRepository:
    global _repo
    with _lock:
        if _repo is None:
            if _db_path is None:
                raise DatabaseNotReady("this server was given no database")
            repo = EhrRepository(_db_path)
            repo.migrate()
            _repo = repo
        return _repo


_prescription_check: PrescriptionCheck | None = None


def set_prescription_check(check: PrescriptionCheck | None) -> None:
    """Run ``check`` before every prescription this process writes (None: no check here, as
    for a terminal's own stdio server, whose agent runs the gate itself)."""
    global _prescription_check
    _prescription_check = check


def _log_read(caller: Caller, tool: str, patient_ids: list[str | None], matches: int | None = None) -> None:
    _repository().log_read(caller.author, tool, patient_ids, terminal=caller.terminal, matches=matches)


@serves(mcp, tool_record("search_patient"))
def search_patient(args: PatientSearchArgs) -> dict[str, Any]:
    """Find patients in the health record by name (any order, case-insensitive, e.g.
    "Maria Garcia", "garcia" or "Garcia, Maria"). Returns matches with patient_id, name,
    birth_date, sex and mrn, plus total_matches. Use the patient_id with get_patient_chart;
    when several patients match, ask the clinician which one is meant. With no exact match the
    error names the closest names in the record: ask the clinician, never pick one."""
    caller, name = callers.caller(), args.name
    with as_tool_errors("search_patient"):
        result = _repository().search_patient(name)
        _log_read(caller, "search_patient", [m["patient_id"] for m in result["matches"]],
                  matches=result["total_matches"])
    if result["total_matches"] == 0:
        log.info("search_patient: no match (%d close names)", len(result.get("closest") or []))
        offer = closest_sentence(result.get("closest") or [])  # "did you mean": ehr_db.name_match
        raise ToolError(tool_error_message("not_found", f"No patient named '{name.strip()}' was found."
                                           + (f" {offer}" if offer else "")))
    log.info("search_patient: %d match(es)", result["total_matches"])
    return result


@serves(mcp, tool_record("get_patient_chart"))
def get_patient_chart(args: PatientChartArgs) -> dict[str, Any]:
    """Read one patient's chart by patient ID (not by name): demographics, active problems
    (SNOMED CT), current medications (RxNorm), allergies, latest labs and vitals with units,
    reference ranges and H/L/N flags, and the most recent clinical notes."""
    caller = callers.caller()
    with as_tool_errors("get_patient_chart"):
        chart = _repository().get_patient_chart(args.patient_id)
        _log_read(caller, "get_patient_chart", [chart["patient"]["patient_id"]])
    log.info("get_patient_chart: ok")
    return chart


@serves(mcp, tool_record(PRESCRIBE))
def prescribe_medication(args: PrescribeMedicationArgs, idempotency_key: str | None = None,
                         approval: ApprovalRecord | None = None, sig: SigRecord | None = None) -> dict[str, Any]:
    """Create a new active medication order for a patient. dosage needs a number and a unit
    ("500 mg", "10 mg/kg", "1 tablet"); frequency like "once daily", "BID", "every 8 hours",
    "q6h" or "PRN"; notes may be null. Returns the new order's id."""
    patient_id, medication_name, dosage, frequency, notes = (
        args.patient_id, args.medication_name, args.dosage, args.frequency, args.notes)
    caller = callers.caller()
    author = caller.author
    kept = callers.kept_approval(approval, caller)
    with as_tool_errors("prescribe_medication", write=True):
        if _prescription_check is not None:
            kept = check_prescription(_prescription_check, _repository(), caller, kept, {"patient_id": patient_id, "medication_name": medication_name,
                                             "dosage": dosage, "frequency": frequency, "notes": notes},
                              override_password(approval))
        new_id = _repository().prescribe_medication(
            patient_id, medication_name, dosage, frequency, notes, author=author, idempotency_key=idempotency_key,
            approval=kept, sig=sig.model_dump() if sig is not None else None,
        )
    log.info("prescribe_medication: created")
    return {
        "id": new_id,
        "patient_id": patient_id.strip(),
        "medication_name": medication_name.strip(),
        "dosage": dosage.strip(),
        "frequency": frequency.strip(),
        "status": "active",
        "author": author,
    }


@serves(mcp, tool_record(CHANGE))
def change_medication_order(args: ChangeMedicationArgs, idempotency_key: str | None = None,
                            approval: ApprovalRecord | None = None, sig: SigRecord | None = None) -> dict[str, Any]:
    """Change the dose or frequency of a medication the patient takes: the active order of
    medication_name is replaced by a new one linked to it (null dosage or frequency keeps the
    order's own). A switch names new_medication_name with its own dosage and frequency: the old
    order is stopped ("switched to ...") and the new drug's written, linked, in one write.
    reason may be null. Returns the new order's id and the id it replaced."""
    patient_id, medication_name, dosage, frequency, reason = (
        args.patient_id, args.medication_name, args.dosage, args.frequency, args.reason)
    switch_to = args.new_medication_name
    caller = callers.caller()
    kept = callers.kept_approval(approval, caller)
    with as_tool_errors("change_medication_order", write=True):
        old = order_tools.order_for(_repository(), patient_id, medication_name, "change")
        if _prescription_check is not None:
            kept = check_prescription(_prescription_check, _repository(), caller, kept, order_tools.as_prescription(old, patient_id, dosage, frequency, switch_to),
                              override_password(approval), tool="change_medication_order", without=old["id"])
        result = order_tools.change(_repository(), "change_medication_order", patient_id, medication_name,
                                    "change", caller.author, dosage=dosage, frequency=frequency, reason=reason,
                                    order_id=old["id"], sig=sig, idempotency_key=idempotency_key, approval=kept,
                                    new_medication_name=switch_to)
    log.info("change_medication_order: replaced")
    return result


@serves(mcp, tool_record(STATUS))
def update_medication_status(args: MedicationStatusArgs, idempotency_key: str | None = None,
                             approval: ApprovalRecord | None = None) -> dict[str, Any]:
    """Stop (discontinue), hold, resume or renew the patient's order of medication_name. stop
    and hold apply to an active order, resume to a held one; renew writes a new active order
    like the current one, linked to it. reason may be null. Returns the order's id and status."""
    patient_id, medication_name, action, reason = args.patient_id, args.medication_name, args.action, args.reason
    caller = callers.caller()
    kept = callers.kept_approval(approval, caller)
    with as_tool_errors("update_medication_status", write=True):
        old = order_tools.order_for(_repository(), patient_id, medication_name, action)
        if _prescription_check is not None and action in order_tools.ACTIVATING:
            kept = check_prescription(_prescription_check, _repository(), caller, kept, order_tools.as_prescription(old, patient_id, None, None),
                              override_password(approval), tool="update_medication_status", without=old["id"])
        result = order_tools.change(_repository(), "update_medication_status", patient_id, medication_name,
                                    action, caller.author, reason=reason, order_id=old["id"],
                                    idempotency_key=idempotency_key, approval=kept)
    log.info("update_medication_status: %s", action)
    return result


@serves(mcp, tool_record(ALLERGY))
def add_allergy(args: AddAllergyArgs, idempotency_key: str | None = None,
                approval: ApprovalRecord | None = None) -> dict[str, Any]:
    """Record an allergy or adverse reaction in a patient's record: the substance, the
    reaction seen, and severity (mild, moderate, severe, or null when unknown). Returns the
    new allergy record's id."""
    patient_id, substance, reaction, severity = args.patient_id, args.substance, args.reaction, args.severity
    caller = callers.caller()
    author = caller.author
    kept = callers.kept_approval(approval, caller)
    with as_tool_errors("add_allergy", write=True):
        new_id = _repository().add_allergy(patient_id, substance, reaction, severity, author=author,
                                           idempotency_key=idempotency_key, approval=kept)
    log.info("add_allergy: created")
    return {
        "id": new_id,
        "patient_id": patient_id.strip(),
        "substance": substance.strip(),
        "reaction": reaction.strip(),
        "severity": severity,
        "author": author,
    }


@serves(mcp, tool_record(NOTE))
def save_clinical_note(args: ClinicalNoteArgs, idempotency_key: str | None = None,
                       approval: ApprovalRecord | None = None) -> dict[str, Any]:
    """Save a clinical note to a patient's record (progress, consult, procedure, discharge,
    telephone or other). Returns the new note's id."""
    patient_id, note_type, note_text = args.patient_id, args.note_type, args.note_text
    caller = callers.caller()
    author = caller.author
    kept = callers.kept_approval(approval, caller)
    with as_tool_errors("save_clinical_note", write=True):
        new_id = _repository().save_clinical_note(patient_id, note_type, note_text, author=author,
                                                  idempotency_key=idempotency_key, approval=kept)
    log.info("save_clinical_note: created")
    return {
        "id": new_id,
        "patient_id": patient_id.strip(),
        "note_type": note_type,
        "characters": len(note_text.strip()),
        "author": author,
    }


# Not one of the agent's tools (no record in ``contracts.catalogue``): the agent's approval code calls it.
@mcp.tool(name=AUDIT_EVENT_TOOL, annotations={"title": "Audit Event", **WRITE})
def record_audit_event(kind: AuditEventKind, patient_id: PatientId | None, details: RejectionDetails) -> dict[str, Any]:
    """Append a rejected write (the clinician refused it) to the record's hash-chained audit
    log, attributed to the caller. details: a JSON object of what was decided (tool, clinician,
    reason, safety). Returns the event's sequence number."""
    caller = callers.caller()
    kept = {**details.model_dump(), "recorded_by": "terminal"}  # never the record's own wording
    if caller.bound:  # the rejecting clinician is the token's account, whatever the request named
        kept["clinician"] = caller.author
    with as_tool_errors(AUDIT_EVENT_TOOL, write=True):
        seq = _repository().record_event(kind, patient_id, caller.author, kept)
    log.info("%s: recorded %s", AUDIT_EVENT_TOOL, kind)
    return {"seq": seq, "kind": kind}


def _startup_check() -> None:
    """Open (and so integrity-check and migrate) the database once at start-up; a fault is one
    line on stderr, and the server keeps serving so each tool reports it as permanent. A record
    older than a copy of its chain head kept outside it (rolled back) is a WARNING line each."""
    try:
        for warning in _repository().custody_warnings():
            print(f"ehr server: WARNING: {warning}", file=sys.stderr, flush=True)
    except (EhrError, DatabaseCorrupt) as exc:
        print(f"ehr server: {exc}", file=sys.stderr, flush=True)
    except sqlite3.Error as exc:
        print(f"ehr server: the health record database {sqlite_fault(exc) or 'cannot be used'}", file=sys.stderr,
              flush=True)


def _configure_and_check(db_path: Path | str | None) -> None:
    configure(db_path)
    _startup_check()


def main(argv: list[str] | None = None) -> int:
    from common.locations import (
        ehr_db_path,  # the launcher resolves the default; the tools take a path
    )

    return serve(mcp, argv, name="ehr", doc=__doc__, configure=_configure_and_check, default_db=ehr_db_path)


if __name__ == "__main__":
    raise SystemExit(main())
