"""What a tool call's outcome becomes: clinician-facing text under a clinical label
(docs/design.md §4.4 step 5, §10).

Invariants:
- Results carry clinical labels; errors become pre-formatted clinician-safe text before any
  model sees them. The raw text is kept only for the trace (``ToolResult.raw_error``); from a
  drug the database does not hold, code reads only the names it gives
  (``contracts.drugs_not_found``) and repeats the tool's caveat from the contract.
- A formatted result is cut at ``MAX_FORMATTED_CHARS``; the trace's summary of a result holds
  counts, never field contents.
- A write whose outcome is unknown says the record may or may not have been changed.
"""

from __future__ import annotations

import json
from dataclasses import replace

from appliance.agent.state import ToolResult
from appliance.tools.host_refusal import HOST_REFUSALS
from appliance.wording import plural
from mcp_servers.contracts import (
    NOT_IN_DATABASE_CAVEATS,
    TOOL_LABELS,
    WRITE_TOOLS,
    drugs_not_found,
)

ERROR_TEMPLATES = {
    "timeout": "The {tool_label} was temporarily unavailable. Please try again shortly.",
    "not_found": "No results were found for {entity} in the {tool_label}.",
    "patient_not_found": "No patient record was found for {entity}.",
    "drug_not_in_database": "{entity} was not found in the drug database.",
    "invalid_args": "The request to the {tool_label} could not be completed: additional information is needed.",
    "missing_required_args": "The request to the {tool_label} needs more information: {fields}.",
    "rate_limit": "The {tool_label} is temporarily busy. The system will retry automatically.",
    "server_error": "The {tool_label} experienced a temporary error. The system will retry automatically.",
    "service_unavailable": "The {tool_label} is currently unavailable.",
    "permanent_failure": "The {tool_label} cannot be used until an administrator repairs its database; "
                         "retrying will not help.",
    "invalid_response": "The {tool_label} returned a response that could not be read.",
    "rejected_by_user": "The clinician did not approve the {tool_label}; nothing was written.",
    "multiple_patient_matches": "Several patients match {entity} in the {tool_label}.",
    "ambiguous_drug_name": "The drug name {entity} is ambiguous.",
    "generic": "The {tool_label} could not be completed.",
}
# Failures the server itself reported: its write transaction rolled back, so nothing was written
# (a timeout or lost connection leaves that unknown, so it is not claimed for them).
SERVER_REFUSALS = frozenset({"permanent_failure", "server_error"})
_ENTITY_KEYS = ("drug_name", "name", "patient_id", "query", "condition", "substance", "medication_name", "nct_id")
MAX_FORMATTED_CHARS = 1500
UNKNOWN_WRITE = ("The {tool_label} was sent but not confirmed: the record may or may not have been changed: "
                 "check the chart before trying again.")


def primary_entity(tool: str, args: dict) -> str:
    if tool == "check_drug_interactions" and args.get("drug_names"):
        return ", ".join(map(str, args["drug_names"]))
    for key in _ENTITY_KEYS:
        if args.get(key):
            return str(args[key])
    return "the request"


def format_error(tool: str, error_type: str, args: dict, fields: list[str] | None = None) -> str:
    template = ERROR_TEMPLATES.get(error_type, ERROR_TEMPLATES["generic"])
    return template.format(
        tool_label=TOOL_LABELS.get(tool, "requested service"),
        entity=primary_entity(tool, args),
        fields=", ".join(fields or []) or "the missing details",
    )


def render_value(value, indent: int = 0) -> list[str]:
    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for k, v in value.items():
            if v in (None, "", [], {}):
                continue
            if isinstance(v, (dict, list)):
                lines.append(f"{pad}{k}:")
                lines += render_value(v, indent + 1)
            else:
                lines.append(f"{pad}{k}: {v}")
        return lines
    if isinstance(value, list):
        lines = []
        for item in value:
            sub = render_value(item, indent + 1)
            if sub:
                lines.append(f"{pad}- {sub[0].strip()}")
                lines += sub[1:]
        return lines
    return [f"{pad}{value}"]


def format_result(tool: str, result: dict) -> str:
    text = f"[{TOOL_LABELS[tool]}]\n" + "\n".join(render_value(result))
    if len(text) > MAX_FORMATTED_CHARS:
        text = text[:MAX_FORMATTED_CHARS].rsplit("\n", 1)[0] + "\n(more details omitted)"
    return text


def summarize_result(result: dict | None) -> str:
    """One line for the trace: counts, never field contents."""
    if not result:
        return "empty result"
    if "total_matches" in result:
        return plural(result["total_matches"], "match")
    for key, value in result.items():
        if isinstance(value, list):
            return plural(len(value), key.rstrip("s"), key) if key.endswith("s") else f"{len(value)} {key}"
    if "id" in result:
        return "record created"
    return plural(len(result), "field")


def not_in_database_message(tool: str, args: dict, raw: str | None) -> str:
    """Only the drugs the server says it does not hold (not every drug of the request), with
    the server's caveat word for word: absence from the database does not mean safe."""
    names = drugs_not_found(raw or "") or (primary_entity(tool, args),)
    message = f"{', '.join(names)} {'was' if len(names) == 1 else 'were'} not found in the drug database"
    caveat = NOT_IN_DATABASE_CAVEATS.get(tool)
    return f"{message} ({caveat})." if caveat else message + "."


def error_result(tool: str, args: dict, error_type: str, raw: str | None, fields=None, seconds=0.0) -> ToolResult:
    """A failed call as the clinician and the later nodes read it (the raw text for the trace only)."""
    message = format_error(tool, error_type, args, fields)
    if error_type == "drug_not_in_database":
        message = not_in_database_message(tool, args, raw)
    if error_type == "rejected_by_user" and raw and raw.strip():
        message += f" Reason given: {raw.strip().rstrip('.')}."
    if error_type == "service_unavailable" and raw in HOST_REFUSALS:  # the terminal can act on it: say it
        message = f"{message.rstrip('.')}: {raw}."
    if tool in WRITE_TOOLS and error_type in SERVER_REFUSALS:
        message += " The record was not changed."
    invalid = error_type == "invalid_args"
    return ToolResult(
        tool_name=tool, tool_label=TOOL_LABELS[tool], args=args, result=None, formatted_result=message,
        error=message, error_type=error_type, raw_error=raw,
        missing_fields=() if invalid else tuple(fields or ()), invalid_fields=tuple(fields or ()) if invalid else (),
        seconds=seconds,
    )


def unknown_write_message(tool: str) -> str:
    """What the clinician reads when a write's outcome is unknown (it is never retried)."""
    return UNKNOWN_WRITE.format(tool_label=TOOL_LABELS[tool])


def readable(result) -> bool:
    """A result the agent can read: a JSON-shaped dict (or nothing)."""
    try:
        json.dumps(result)
        return isinstance(result, dict) or result is None
    except (TypeError, ValueError):
        return False


def with_safety(result: ToolResult, report, approved: dict | None = None) -> ToolResult:
    """The gate's report travels with the result: its text reaches synthesis (with the
    outcome, or with the error), and its audit entry the trace (for a write, as the record
    keeps it in ``approved``, with any override reason)."""
    if report is None:
        return result
    text = report.formatted()
    audit = approved["safety"] if approved is not None else report.to_audit()
    if result.error_type is None:
        return replace(result, formatted_result=f"{result.formatted_result}\n{text}", safety=audit)
    return replace(result, error=f"{result.error} {text}", safety=audit)
