"""How a tool fails, for every MCP server and the agent that reads its answers.

Invariants:
- Expected failures travel as an MCP ``ToolError`` whose message is ``"<error_type>: <text>"``
  (``tool_error_message``) with ``<error_type>`` from ``ERROR_TYPES``; ``parse_tool_error``
  reads that back, and any other shape is ``server_error``. The text is clinician-safe and
  never carries patient data beyond what the caller sent.
- Drugs the knowledge server does not hold are named in one text (``drugs_not_found_text``)
  that ``drugs_not_found`` reads back, with the caveat that absence from a reference never
  means a drug or a combination is safe (``NOT_IN_DATABASE_CAVEATS``).
"""

from __future__ import annotations

import re
from typing import Literal

ErrorType = Literal[
    "not_found",
    "patient_not_found",
    "drug_not_in_database",
    "multiple_patient_matches",
    "missing_required_args",
    "ambiguous_drug_name",
    "invalid_args",
    "timeout",
    "rate_limit",
    "service_unavailable",
    "permanent_failure",  # the service answered but cannot work until someone fixes it: never retried
    "server_error",
    "invalid_response",
    "rejected_by_user",
]
ERROR_TYPES: frozenset[str] = frozenset(ErrorType.__args__)  # type: ignore[attr-defined]


def tool_error_message(error_type: str, text: str) -> str:
    """Build the message of a ToolError so the client can recover the error type."""
    if error_type not in ERROR_TYPES:
        raise ValueError(f"unknown error type {error_type!r}")
    return f"{error_type}: {text}"


def parse_tool_error(message: str) -> tuple[str, str]:
    """Split a ToolError message into (error_type, text); unknown shapes are server_error."""
    head, sep, rest = message.partition(": ")
    if sep and head in ERROR_TYPES:
        return head, rest
    return "server_error", message


# -- drugs the knowledge server does not hold --------------------------------------------------
# The caveat that goes with them, word for word from the server to the clinician's answer:
# absence from a reference never means a drug or a combination is safe.
NOT_IN_DATABASE_CAVEATS: dict[str, str] = {
    "check_drug_safety": "this does not mean it is safe",
    "check_drug_interactions": "this does not mean the combination is safe",
}
_NOT_FOUND = " not found in the local drug database"


def drugs_not_found_text(tool: str, names: list[str]) -> str:
    """The server's text for drugs it does not hold: each name quoted, then the tool's caveat.
    ``drugs_not_found`` reads the names back."""
    quoted = ", ".join(f"'{n}'" for n in names)
    what = "interaction" if tool == "check_drug_interactions" else "safety"
    them = "it" if len(names) == 1 else "them"
    caveat = NOT_IN_DATABASE_CAVEATS.get(tool, NOT_IN_DATABASE_CAVEATS["check_drug_safety"])
    return f"{quoted}{_NOT_FOUND}; no {what} information is available for {them} here ({caveat})"


def drugs_not_found(text: str) -> tuple[str, ...]:
    """The drug names of a ``drugs_not_found_text``, in order; empty for any other text."""
    head, sep, _ = text.partition(_NOT_FOUND)
    if not sep:
        return ()
    return tuple(re.findall(r"'(.*?)'(?=, '|$)", head))
