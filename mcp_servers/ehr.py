"""MCP server 'ehr': the local electronic health record, read and written by the agent.

Invariants:
- Tool names and parameters match ``contracts.ARG_SCHEMAS`` exactly (same names, order,
  types, bounds; every parameter required, nullable where it may be empty).
- Every expected failure is a ``ToolError`` whose message is ``"<error_type>: <text>"``
  (``contracts.tool_error_message``); the text is clinician-safe and carries no patient data
  beyond what the caller sent. Anything unexpected is masked (``mask_error_details=True``).
- Logs name the tool and the outcome, never arguments or record contents.
- The tools use the database path given to ``configure`` (tests; ``main`` passes ``--db`` or
  ``common.locations.ehr_db_path()``); the schema is migrated at the first tool call, once per
  process. A server given no path reports the record not set up.
- Writes are attributed per request. Over streamable HTTP (one server shared by several
  terminals) the author is the request's ``X-Appliance-User`` header (percent-encoded UTF-8,
  sent by ``appliance.tools.mcp_client`` from the terminal's ``$APPLIANCE_USER``). Over stdio
  (one server per terminal), and for an HTTP client that sends no such header, it is the
  server's ``$APPLIANCE_USER``, else the OS account name (``common.operator``). The header
  is the caller's claim, not an authentication. The repository stores the author and time with each record and its audit row.

Run: ``python -m mcp_servers.ehr [--db PATH] [--http HOST:PORT]`` (stdio by default).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_http_request
from pydantic import Field

from common.operator import operator_name
from ehr_db.errors import DatabaseNotReady, EhrError, InvalidField, PatientNotFound
from ehr_db.repository import EhrRepository
from mcp_servers._serve import ArgumentErrors, serve
from mcp_servers.contracts import Name, PatientId, ShortText, tool_error_message

log = logging.getLogger("mcp_servers.ehr")

USER_HEADER = "X-Appliance-User"
MAX_AUTHOR_CHARS = 200
READ = {"readOnlyHint": True, "openWorldHint": False}
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


def _author() -> str:
    """Who is writing: the HTTP request's user header, else this process's user."""
    try:
        raw = get_http_request().headers.get(USER_HEADER, "")
    except RuntimeError:  # stdio or in memory: no HTTP request behind this call
        raw = ""
    user = " ".join(unquote(raw, errors="replace").split())[:MAX_AUTHOR_CHARS]
    if user and user.isprintable():
        return user
    return operator_name()


@contextmanager
def _edge(tool: str) -> Iterator[None]:
    """Convert repository and database failures into contract ToolErrors."""
    try:
        yield
    except PatientNotFound as exc:
        log.info("%s: patient not found", tool)
        raise ToolError(tool_error_message(
            "patient_not_found", f"No patient with ID '{exc.patient_id}' is in the health record."
        )) from None
    except InvalidField as exc:
        log.info("%s: rejected field %s", tool, exc.field)
        raise ToolError(tool_error_message("invalid_args", f"{exc.field} {exc.reason}")) from None
    except DatabaseNotReady:
        log.warning("%s: database not initialised", tool)
        raise ToolError(tool_error_message(
            "service_unavailable", "The health record is not set up yet; run 'appliance init'."
        )) from None
    except EhrError:
        log.warning("%s: record error", tool)
        raise ToolError(tool_error_message("server_error", "The health record rejected the request.")) from None
    except sqlite3.OperationalError as exc:
        busy = "locked" in str(exc) or "busy" in str(exc)
        log.warning("%s: database %s", tool, "busy" if busy else "error")
        if busy:
            raise ToolError(tool_error_message("service_unavailable", "The health record is busy; try again.")) from None
        raise ToolError(tool_error_message("server_error", "The health record could not be read.")) from None
    except sqlite3.Error:
        log.warning("%s: database error", tool)
        raise ToolError(tool_error_message("server_error", "The health record could not be read.")) from None


@mcp.tool(annotations={"title": "Patient Search", **READ})
def search_patient(name: Name) -> dict[str, Any]:
    """Find patients in the health record by name (any order, case-insensitive, e.g.
    "Maria Garcia", "garcia" or "Garcia, Maria"). Returns matches with patient_id, name,
    birth_date, sex and mrn, plus total_matches. Use the patient_id with get_patient_chart;
    when several patients match, ask the clinician which one is meant."""
    with _edge("search_patient"):
        result = _repository().search_patient(name)
    if result["total_matches"] == 0:
        log.info("search_patient: no match")
        raise ToolError(tool_error_message("not_found", f"No patient named '{name.strip()}' was found."))
    log.info("search_patient: %d match(es)", result["total_matches"])
    return result


@mcp.tool(annotations={"title": "Patient Record", **READ})
def get_patient_chart(patient_id: PatientId) -> dict[str, Any]:
    """Read one patient's chart by patient ID (not by name): demographics, active problems
    (SNOMED CT), current medications (RxNorm), allergies, latest labs and vitals with units,
    reference ranges and H/L/N flags, and the most recent clinical notes."""
    with _edge("get_patient_chart"):
        chart = _repository().get_patient_chart(patient_id)
    log.info("get_patient_chart: ok")
    return chart


@mcp.tool(annotations={"title": "Prescription", **WRITE})
def prescribe_medication(
    patient_id: PatientId,
    medication_name: Name,
    dosage: Annotated[str, Field(min_length=1, max_length=40)],
    frequency: Annotated[str, Field(min_length=1, max_length=40)],
    notes: Annotated[str | None, Field(max_length=200)],
) -> dict[str, Any]:
    """Create a new active medication order for a patient. dosage needs a number and a unit
    ("500 mg", "10 mg/kg", "1 tablet"); frequency like "once daily", "BID", "every 8 hours",
    "q6h" or "PRN"; notes may be null. Returns the new order's id."""
    author = _author()
    with _edge("prescribe_medication"):
        new_id = _repository().prescribe_medication(
            patient_id, medication_name, dosage, frequency, notes, author=author
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


@mcp.tool(annotations={"title": "Allergy Documentation", **WRITE})
def add_allergy(
    patient_id: PatientId,
    substance: Name,
    reaction: ShortText,
    severity: Literal["mild", "moderate", "severe"] | None,
) -> dict[str, Any]:
    """Record an allergy or adverse reaction in a patient's record: the substance, the
    reaction seen, and severity (mild, moderate, severe, or null when unknown). Returns the
    new allergy record's id."""
    author = _author()
    with _edge("add_allergy"):
        new_id = _repository().add_allergy(patient_id, substance, reaction, severity, author=author)
    log.info("add_allergy: created")
    return {
        "id": new_id,
        "patient_id": patient_id.strip(),
        "substance": substance.strip(),
        "reaction": reaction.strip(),
        "severity": severity,
        "author": author,
    }


@mcp.tool(annotations={"title": "Clinical Note", **WRITE})
def save_clinical_note(
    patient_id: PatientId,
    note_type: Literal["progress", "consult", "procedure", "discharge", "telephone", "other"],
    note_text: Annotated[str, Field(min_length=1, max_length=1500)],
) -> dict[str, Any]:
    """Save a clinical note to a patient's record (progress, consult, procedure, discharge,
    telephone or other). Returns the new note's id."""
    author = _author()
    with _edge("save_clinical_note"):
        new_id = _repository().save_clinical_note(patient_id, note_type, note_text, author=author)
    log.info("save_clinical_note: created")
    return {
        "id": new_id,
        "patient_id": patient_id.strip(),
        "note_type": note_type,
        "characters": len(note_text.strip()),
        "author": author,
    }


def main(argv: list[str] | None = None) -> int:
    from common.locations import ehr_db_path  # the launcher resolves the default; the tools take a path

    return serve(mcp, argv, name="ehr", doc=__doc__, configure=configure, default_db=ehr_db_path)


if __name__ == "__main__":
    raise SystemExit(main())
