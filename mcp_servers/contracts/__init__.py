"""Tool contracts: the one place that says what each agent tool is called, what it takes,
what it returns and how it fails.

Invariants:
- A tool is one record (``tool.Tool``, the records in ``catalogue``). The tables below
  (``ARG_SCHEMAS``, ``TOOL_LABELS``, ``TOOL_SERVERS``, ``WRITE_TOOLS``, ``SIG_TOOLS``,
  ``FULL_DESCRIPTIONS``, ``TOOL_EXAMPLES``, ``ToolName``) are live views of the records, never
  written by hand, so adding a tool is one record plus its server function.
- The agent (TOOL_SELECT stage 2) builds its grammar from a tool's argument model; the server
  function takes the same model (``mcp_servers.serving.serves`` makes its signature from it),
  so the schema the model fills and the one the server checks cannot drift.
- Every argument field is required; fields that may be empty are nullable, never defaulted,
  because the grammar converter moves defaulted fields to the end (docs/design.md §6).
- Expected failures travel as an MCP ``ToolError`` whose message is ``"<error_type>: <text>"``
  (``mcp_servers.tool_errors``, whose names this module also gives).
- The write tools' hidden parameters (``IDEMPOTENCY_KEY``, ``APPROVAL``, ``SIG``) are set by
  the agent's code after approval; they are in no argument model, so the model never sees or
  fills them.
"""

from __future__ import annotations

from typing import Literal

from mcp_servers.contracts.arguments import (
    AddAllergyArgs,
    ChangeMedicationArgs,
    ClinicalNoteArgs,
    ClinicalTrialsArgs,
    DrugInteractionArgs,
    DrugSafetyArgs,
    ImageAnalysisArgs,
    LiteratureSearchArgs,
    MedicationStatusArgs,
    Name,
    NctId,
    OrderAction,
    PageSize,
    PatientChartArgs,
    PatientId,
    PatientSearchArgs,
    PrescreenArgs,
    PrescribeMedicationArgs,
    ShortText,
    StudyType,
    ToolArgs,
    TrialDetailsArgs,
    TrialPhase,
    TrialStatus,
    Years,
)
from mcp_servers.contracts.catalogue import ALLERGY, CHANGE, NOTE, PRESCRIBE, STATUS
from mcp_servers.contracts.hidden import (
    APPROVAL,
    AUDIT_EVENT_TOOL,
    IDEMPOTENCY_KEY,
    MAX_AUDIT_JSON_CHARS,
    SIG,
    ApprovalArg,
    ApprovalRecord,
    AuditEventKind,
    IdempotencyKey,
    RejectionDetails,
    SigArg,
    SigRecord,
)
from mcp_servers.contracts.tool import (
    TOOLS,
    Tool,
    ToolSet,
    ToolTable,
    register,
    tool_record,
)

# How a tool fails is part of its contract: its callers read these names from here too.
from mcp_servers.tool_errors import (
    ERROR_TYPES,
    NOT_IN_DATABASE_CAVEATS,
    ErrorType,
    drugs_not_found,
    drugs_not_found_text,
    parse_tool_error,
    tool_error_message,
)

# MCP annotations of a lookup that reads a rebuilt store and nothing else, for the servers' tools
# that have no record (the UMLS server's, the vocabularies): same answer for the same call, no
# side effect, nothing outside. A record's hints are its own (``Tool.annotations``).
READ_ONLY = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}

# The tables, read off the records (docs/design.md §12).
ARG_SCHEMAS = ToolTable(lambda t: t.args)
TOOL_LABELS = ToolTable(lambda t: t.label)  # tool names never reach synthesis
TOOL_SERVERS = ToolTable(lambda t: t.server)
FULL_DESCRIPTIONS = ToolTable(lambda t: t.full_description)
TOOL_EXAMPLES = ToolTable(lambda t: t.example)
WRITE_TOOLS = ToolSet(lambda t: t.write)
SIG_TOOLS = ToolSet(lambda t: t.sig)


def __getattr__(name: str):
    """``ToolName``: the registered tools' names as a ``Literal``, made when it is imported."""
    if name == "ToolName":
        return Literal[tuple(TOOLS)]  # type: ignore[valid-type]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALLERGY", "APPROVAL", "ARG_SCHEMAS", "AUDIT_EVENT_TOOL", "AddAllergyArgs", "ApprovalArg", "ApprovalRecord",
    "AuditEventKind", "CHANGE", "ChangeMedicationArgs", "ClinicalNoteArgs", "ClinicalTrialsArgs",
    "DrugInteractionArgs", "DrugSafetyArgs", "ERROR_TYPES", "ErrorType", "FULL_DESCRIPTIONS", "IDEMPOTENCY_KEY",
    "IdempotencyKey", "ImageAnalysisArgs", "LiteratureSearchArgs", "MAX_AUDIT_JSON_CHARS", "MedicationStatusArgs",
    "NOTE", "NOT_IN_DATABASE_CAVEATS", "Name", "NctId", "OrderAction", "PRESCRIBE", "PageSize", "PatientChartArgs",
    "PatientId", "PatientSearchArgs", "PrescreenArgs", "PrescribeMedicationArgs", "READ_ONLY", "RejectionDetails",
    "SIG", "SIG_TOOLS", "STATUS", "ShortText", "SigArg", "SigRecord", "StudyType", "TOOLS", "TOOL_EXAMPLES",
    "TOOL_LABELS", "TOOL_SERVERS", "Tool", "ToolArgs", "ToolSet", "ToolTable", "TrialDetailsArgs", "TrialPhase",
    "TrialStatus", "WRITE_TOOLS", "Years", "drugs_not_found", "drugs_not_found_text", "parse_tool_error",
    "register", "tool_error_message", "tool_record",
]
