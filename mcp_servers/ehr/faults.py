"""How the EHR server's tools report failure: repository and database errors become contract
ToolErrors (``as_tool_errors``), and a database fault is worded once (``sqlite_fault``).

Invariants:
- Expected failures keep their kind (``patient_not_found``, ``not_found``,
  ``ambiguous_drug_name``, ``invalid_args``); faults no retry can fix (a missing, damaged,
  read-only or full database) are ``permanent_failure`` with one clear sentence; a busy
  database is ``service_unavailable``.
- A failed write's message always says the record was not changed (``NOT_CHANGED``: its
  transaction rolled back).
- Messages are clinician-safe and carry no patient data beyond what the caller sent; logs name
  the tool and the outcome, never arguments or record contents.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from fastmcp.exceptions import ToolError

from common.sqlite import DatabaseCorrupt
from ehr_db.errors import (
    AmbiguousOrder,
    DatabaseNotReady,
    EhrError,
    InvalidField,
    OrderNotFound,
    PatientNotFound,
)
from mcp_servers.ehr import order_tools
from mcp_servers.tool_errors import tool_error_message

log = logging.getLogger("mcp_servers.ehr.server")

NOT_CHANGED = " The record was not changed."
# SQLite result codes (``sqlite_errorname``, extended codes by prefix) that no retry can fix.
PERMANENT_SQLITE = {
    "SQLITE_CORRUPT": "is damaged", "SQLITE_NOTADB": "is damaged", "SQLITE_READONLY": "is read-only",
    "SQLITE_CANTOPEN": "cannot be opened", "SQLITE_PERM": "cannot be opened", "SQLITE_FULL": "has no disk space left",
    "SQLITE_IOERR": "cannot be read from disk",
}
_TRANSIENT_SQLITE = ("SQLITE_BUSY", "SQLITE_LOCKED")


def sqlite_fault(exc: sqlite3.Error) -> str | None:
    """'busy', a permanent fault's wording (``PERMANENT_SQLITE``), or None for anything else."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    if name.startswith(_TRANSIENT_SQLITE) or "locked" in text or "busy" in text:
        return "busy"
    for code, wording in PERMANENT_SQLITE.items():
        if name == code or name.startswith(code + "_"):
            return wording
    for words, wording in (("readonly", "is read-only"), ("malformed", "is damaged"),
                           ("not a database", "is damaged"), ("unable to open", "cannot be opened"),
                           ("disk is full", "has no disk space left"), ("disk i/o", "cannot be read from disk")):
        if words in text:
            return wording
    return None


def _permanent(tool: str, wording: str, write: bool,
               remedy: str = "An administrator must repair it or restore it from a backup.") -> ToolError:
    log.error("%s: permanent fault: the database %s", tool, wording)
    text = f"The health record cannot be used: its database {wording}. {remedy}"
    return ToolError(tool_error_message("permanent_failure", text + (NOT_CHANGED if write else "")))


@contextmanager
def as_tool_errors(tool: str, *, write: bool = False) -> Iterator[None]:
    """Convert repository and database failures into contract ToolErrors: expected ones by
    kind, faults that retrying cannot fix as ``permanent_failure``; a failed write always says
    the record was not changed (its transaction rolled back)."""
    try:
        yield
    except PatientNotFound as exc:
        log.info("%s: patient not found", tool)
        raise ToolError(tool_error_message(
            "patient_not_found", f"No patient with ID '{exc.patient_id}' is in the health record."
        )) from None
    except OrderNotFound as exc:
        log.info("%s: no matching order", tool)
        raise ToolError(tool_error_message("not_found", order_tools.not_found_text(exc) + NOT_CHANGED)) from None
    except AmbiguousOrder as exc:
        log.info("%s: several matching orders", tool)
        raise ToolError(tool_error_message("ambiguous_drug_name", order_tools.ambiguous_text(exc) + NOT_CHANGED)) \
            from None
    except InvalidField as exc:
        log.info("%s: rejected field %s", tool, exc.field)
        raise ToolError(tool_error_message("invalid_args", f"{exc.field} {exc.reason}")) from None
    except DatabaseNotReady:
        raise _permanent(tool, "is not set up", write, "An administrator must run 'appliance init'.") from None
    except DatabaseCorrupt:
        raise _permanent(tool, "is damaged", write) from None
    except EhrError:
        log.warning("%s: record error", tool)
        raise ToolError(tool_error_message("server_error", "The health record rejected the request."
                                           + (NOT_CHANGED if write else ""))) from None
    except sqlite3.Error as exc:
        fault = sqlite_fault(exc)
        if fault == "busy":
            log.warning("%s: database busy", tool)
            raise ToolError(tool_error_message(
                "service_unavailable", "The health record is busy; try again." + (NOT_CHANGED if write else "")
            )) from None
        if fault is not None:
            raise _permanent(tool, fault, write) from None
        log.warning("%s: database error", tool)
        text = "The health record could not be written to." + NOT_CHANGED if write else \
            "The health record could not be read."
        raise ToolError(tool_error_message("server_error", text)) from None
