"""Node 4, TOOL_EXECUTE (deterministic): validate, approve writes, call, label, pre-format.

Invariants:
- Arguments are validated against the tool contract before any call; invalid arguments never
  reach a server.
- Write tools run only after the approver says yes, with the (possibly edited) arguments
  re-validated; a rejection is an error result, nothing is written, and it is recorded on the
  record's audit log (``appliance.agent.write_audit``; a failure to record it changes nothing).
  An approved write carries its approval (approval or override of the safety report, who
  decided, the report) to the record, which keeps it in the write's own audit row.
- A patient ID is used only when it is grounded: typed by the clinician in this message
  (recognised as an ID, picked from code's list of matches, or written there verbatim as a
  word with a digit), the patient open in the terminal (current in the line session), or
  returned by an earlier call this turn. An ID the model produced from nowhere counts as
  missing, so code asks the clinician instead of acting on a guess. A well-formed ID the
  record does not hold is the record's answer ("patient_not_found"), and a question. A write
  goes only to a patient the clinician named: a search's match counts for it only when the
  clinician said the name searched for, so an instruction in a tool's output cannot move a
  write to another patient.
- The clinical values of a write (drug, dose, frequency; allergen, reaction) must be the
  clinician's own words, in this message or the recent exchanges: a value the model filled in
  counts as missing and the clinician is asked; a drug may be the generic name of one they
  named ("Tylenol" written, acetaminophen prescribed). Values the clinician edits in the
  approval dialog are theirs by definition. The free text of a write (a prescription's notes,
  a note's text) may not copy what the model read this turn, in tool results or earlier
  answers, and the clinician did not type (``COPIED_RUN`` words in a row): instructions hidden
  in a chart, a label or an abstract never reach the approval dialog as the clinician's words,
  and the clinician is asked instead. The drug of a prescription must also be a drug
  name the recogniser knows (``appliance.medication.names``: bundled dictionary, overlay, the
  servers' vocabularies): a word such as "mild" the clinician said is asked about, not
  prescribed. The record refuses a drug that is the patient's own name (``ehr_db``).
- A change of an order on the chart (``order_gate``) is looked up on the chart before the
  approver is asked: no such order, or two alike, is said or asked, never approved blind. The
  safety gate checks every write that makes an order active (a prescription, a change, a resume
  or renewal) with the values it makes; an approved order carries the sig code read from the
  approved arguments (``contracts.SIG``).
- Results carry clinical labels; errors become pre-formatted clinician-safe text before any
  model sees them (docs/design.md §10). The raw text is kept only for the trace; from a drug
  the database does not hold, code reads only the names it gives (``contracts.drugs_not_found``)
  and repeats the tool's caveat from the contract.
- Each approved write carries an idempotency key made here (a fresh uuid4 per approval, never
  the model's), which the record enforces. A write whose outcome is unknown (a timeout, a
  connection lost mid-call, an unreadable answer) says the record may or may not have been
  changed, and is never retried (``error_handler``).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from appliance.agent.order_gate import (
    ORDER_TOOLS,
    gate_write,
    implied_dosage_said,
    order_problem,
    with_sig,
)
from appliance.agent.state import AgentState, ToolResult
from appliance.agent.write_audit import approval_record, record_rejection
from appliance.safety.policy import Override, OverridePolicy, decide
from appliance.tools.base import Approver, ToolBox, ToolOutcome
from appliance.tools.host_refusal import HOST_REFUSALS
from appliance.wording import plural
from common.patient_ids import is_patient_id
from mcp_servers.contracts import (
    ARG_SCHEMAS,
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
# Write fields whose values must come from the clinician's words (the grammar makes the model
# fill every field, so a value nobody said would otherwise reach the approval dialog).
GROUNDED_WRITE_FIELDS = {
    "prescribe_medication": ("medication_name", "dosage", "frequency"),
    "change_medication_order": ("medication_name", "dosage", "frequency"),
    "update_medication_status": ("medication_name",),
    "add_allergy": ("substance", "reaction"),
}
# Write fields of free text, and how many words in a row copied from what the model read (and
# the clinician did not type) make a copy: short enough for an instruction, long enough that a
# dictated note sharing a phrase with the chart ("type 2 diabetes") is not one.
FREE_TEXT_FIELDS = {"prescribe_medication": ("notes",), "save_clinical_note": ("note_text",),
                    "change_medication_order": ("reason",), "update_medication_status": ("reason",)}
COPIED_RUN = 4
# Grounded fields a change may leave null: the order keeps its own value.
NULLABLE_GROUNDED = {"change_medication_order": ("dosage", "frequency")}
_WORD_RE = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_ID_WORD_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?")
# Failures the server itself reported: its write transaction rolled back, so nothing was written
# (a timeout or lost connection leaves that unknown, so it is not claimed for them).
SERVER_REFUSALS = frozenset({"permanent_failure", "server_error"})
_ENTITY_KEYS = ("drug_name", "name", "patient_id", "query", "condition", "substance", "medication_name", "nct_id")
MAX_FORMATTED_CHARS = 1500


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


def validate_args(tool: str, args: dict | None) -> tuple[dict | None, str | None, list[str]]:
    """(clean args, error type, fields): the missing fields for ``missing_required_args``, the
    rejected ones for ``invalid_args``. A patient ID must be well formed (any FHIR resource id,
    ``common.patient_ids``; surrounding spaces are dropped); whether the record holds it is
    the record's answer."""
    try:
        clean = ARG_SCHEMAS[tool].model_validate(args or {}).model_dump()
    except ValidationError as exc:
        fields = {".".join(map(str, e["loc"])): e["type"] for e in exc.errors()}
        missing = [f for f, kind in fields.items() if kind in ("missing", "string_too_short", "too_short")]
        if missing:
            return None, "missing_required_args", missing
        return None, "invalid_args", list(fields)
    if "patient_id" in clean:
        clean["patient_id"] = clean["patient_id"].strip()
        if not is_patient_id(clean["patient_id"]):
            return None, "invalid_args", ["patient_id"]
    return clean, None, []


def words(text: str) -> list[str]:
    """Lower-case words and numbers: "500mg" and "500 mg" both give ["500", "mg"]."""
    return _WORD_RE.findall(text.lower())


def said_by_clinician(value: str, clinician_text: str) -> bool:
    """Whether ``value``'s words occur, in order and adjacent, in what the clinician wrote."""
    want, have = words(value), words(clinician_text)
    if not want:
        return False
    n = len(want)
    return any(have[i:i + n] == want for i in range(len(have) - n + 1))


# Write fields that name a drug: the generic of a drug the clinician named is theirs too
# ("Tylenol" written, "acetaminophen" prescribed), since INPUT_ASSEMBLY offers the generic.
DRUG_FIELDS = frozenset({"medication_name", "substance"})


def ungrounded_fields(tool: str, args: dict, clinician_text: str, drugs_named: tuple[str, ...] = ()) -> list[str]:
    named = {tuple(words(g)) for g in drugs_named}
    return [
        f for f in GROUNDED_WRITE_FIELDS.get(tool, ())
        if not (args.get(f) is None and f in NULLABLE_GROUNDED.get(tool, ()))  # kept as charted
        and not said_by_clinician(str(args.get(f) or ""), clinician_text)
        and not (f == "dosage" and implied_dosage_said(str(args.get(f) or ""), clinician_text))
        and not (f in DRUG_FIELDS and tuple(words(str(args.get(f) or ""))) in named)
    ]


def _runs(text: str, n: int) -> set[tuple[str, ...]]:
    found = words(text)
    return {tuple(found[i:i + n]) for i in range(len(found) - n + 1)}


def copied_fields(tool: str, args: dict, clinician_text: str, model_read: str) -> list[str]:
    """The free-text fields (``FREE_TEXT_FIELDS``) holding ``COPIED_RUN`` words in a row that
    the model read (``model_read``) and the clinician did not type."""
    foreign = _runs(model_read, COPIED_RUN) - _runs(clinician_text, COPIED_RUN)
    return [f for f in FREE_TEXT_FIELDS.get(tool, ()) if _runs(str(args.get(f) or ""), COPIED_RUN) & foreign]


def model_read(state: AgentState) -> str:
    """What the model read this turn that the clinician did not write: the tool results and
    failures so far, image findings, and the assistant's side of the recent exchanges."""
    seen = [text for role, text in state.conversation_history if role != "user"]
    for r in state.tool_results:
        seen += [r.formatted_result or "", r.error or "", r.raw_error or ""]
    if state.image_findings:
        seen.append(json.dumps(state.image_findings, ensure_ascii=False))
    return "\n".join(seen)


def clinician_text(state: AgentState) -> str:
    """This message and the clinician's side of the recent exchanges."""
    said = [text for role, text in state.conversation_history if role == "user"]
    return "\n".join(said + [state.user_query])


def not_in_database_message(tool: str, args: dict, raw: str | None) -> str:
    """Only the drugs the server says it does not hold (not every drug of the request), with
    the server's caveat word for word: absence from the database does not mean safe."""
    names = drugs_not_found(raw or "") or (primary_entity(tool, args),)
    message = f"{', '.join(names)} {'was' if len(names) == 1 else 'were'} not found in the drug database"
    caveat = NOT_IN_DATABASE_CAVEATS.get(tool)
    return f"{message} ({caveat})." if caveat else message + "."


def _error_result(tool: str, args: dict, error_type: str, raw: str | None, fields=None, seconds=0.0) -> ToolResult:
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


def typed_ids(text: str) -> set[str]:
    """Words of ``text`` that hold a digit and are well-formed patient IDs: what the clinician
    typed, even where it is too short to be recognised as an ID in text ("pat-7")."""
    return {w for w in _ID_WORD_RE.findall(text) if any(c.isdigit() for c in w) and is_patient_id(w)}


def grounded_patient_ids(state: AgentState, *, for_write: bool = False) -> set[str]:
    """The patient IDs a call may use. ``for_write``: only patients the clinician named (typed,
    picked, open, or found by a search for a name they said), never one reached through a
    search or a call that a tool's output led the model to."""
    ids = set(state.extracted_entities.patient_ids) | typed_ids(state.user_query)
    if state.selected_patient_id:
        ids.add(state.selected_patient_id)
    said = set(words(clinician_text(state))) if for_write else set()
    for r in state.tool_results:
        searched = str(r.args.get("name") or "")
        if r.result and r.tool_name == "search_patient" and (not for_write or set(words(searched)) <= said):
            ids.update(m.get("patient_id") for m in r.result.get("matches", []))
        if not for_write and r.error_type is None and r.args.get("patient_id"):
            ids.add(r.args["patient_id"])
    return ids


def execute(
    tool: str, args: dict | None, tools: ToolBox, approver: Approver, deadline: float,
    grounded_ids: set[str] | None = None, said: str | None = None, drugs_named: tuple[str, ...] = (),
    safety_gate: SafetyGate | None = None, known_drug: Callable[[str], bool] | None = None,
    read: str = "",
) -> ToolResult:
    """Run one tool call. ``grounded_ids`` and ``said`` (the clinician's words, with
    ``drugs_named``: the generics of the drugs they named) enable the grounding checks; without
    them (direct calls from tests and tools) none is made. ``known_drug`` (the drug recogniser)
    refuses a prescription whose drug is no drug name it knows ("mild", a person's name). ``safety_gate`` checks a
    prescription against the chart before the approver sees it (and again when the approver
    changed the drug); its report goes to the approver, the answer and the write."""
    args = args or {}
    clean, error_type, missing = validate_args(tool, args)
    if error_type:
        return _error_result(tool, args, error_type, "arguments failed validation", missing)
    if grounded_ids is not None and "patient_id" in clean and clean["patient_id"] not in grounded_ids:
        return _error_result(tool, clean, "missing_required_args", "patient ID not grounded", ["patient_id"])
    if said is not None:
        unsaid = ungrounded_fields(tool, clean, said, drugs_named) + copied_fields(tool, clean, said, read)
        if unsaid:
            return _error_result(tool, clean, "missing_required_args", "values not given by the clinician", unsaid)
    if known_drug is not None and tool in ORDER_TOOLS and not known_drug(clean["medication_name"]):
        return _error_result(tool, clean, "missing_required_args", "not a drug name the appliance knows",
                             ["medication_name"])
    problem = order_problem(tool, clean, tools, deadline)  # a change of an order the chart does not show once
    if problem is not None:
        result = _error_result(tool, clean, problem[0], problem[1])
        return replace(result, error=problem[1], formatted_result=problem[1])
    waited = None
    report = None
    approved = None  # an approved write's approval, as the record keeps it
    if tool in WRITE_TOOLS:
        asked = time.perf_counter()
        for _ in range(MAX_APPROVAL_ROUNDS):
            report = gate_write(tool, clean, safety_gate)
            approval = approver(tool, dict(clean), safety=report)
            if not approval.approved:
                waited = time.perf_counter() - asked
                record_rejection(tools, tool, clean.get("patient_id"), approval, report, deadline)
                return _with_safety(replace(_error_result(tool, clean, "rejected_by_user", approval.reason),
                                            approval_seconds=waited), report)
            checked_drug = clean.get("medication_name")
            clean, error_type, missing = validate_args(tool, approval.args)
            if not error_type and grounded_ids is not None and clean["patient_id"] not in grounded_ids:
                error_type, missing = "missing_required_args", ["patient_id"]
            if error_type:
                result = _error_result(tool, approval.args, error_type, "edited arguments failed validation", missing)
                return _with_safety(replace(result, approval_seconds=time.perf_counter() - asked), report)
            if report is None or clean.get("medication_name") == checked_drug:
                break  # approved as checked; a changed drug is checked and shown again
        else:
            return _with_safety(_error_result(tool, clean, "rejected_by_user", "the drug kept changing in approval"),
                                report)
        waited = time.perf_counter() - asked
        decision = None if report is None else decide(
            report, True, Override(approval.override_reason, approval.reauthenticated), OverridePolicy.from_settings(),
            how_to_override=HOW_TO_OVERRIDE)
        if decision is not None and not decision.allowed:  # the one policy, whatever the door let through
            refused = replace(approval, approved=False, reason=decision.message)
            record_rejection(tools, tool, clean.get("patient_id"), refused, report, deadline)
            return _with_safety(replace(_error_result(tool, clean, "rejected_by_user", decision.message),
                                        approval_seconds=waited), report)
        approved = approval_record(approval, decision)
    started = time.perf_counter()
    if tool in WRITE_TOOLS:  # one key per approved write: the record performs it at most once
        outcome: ToolOutcome = tools.call(tool, with_sig(tool, clean), deadline, idempotency_key=str(uuid.uuid4()),
                                          approval=approved)
    else:
        outcome = tools.call(tool, clean, deadline)
    seconds = time.perf_counter() - started
    if tool in WRITE_TOOLS and (outcome.uncertain or (outcome.ok and not _readable(outcome.result))):
        raw = outcome.message if not outcome.ok else "result was not JSON-shaped"
        result = _error_result(tool, clean, outcome.error_type or "invalid_response", raw, seconds=seconds)
        return replace(result, error=unknown_write_message(tool), formatted_result=unknown_write_message(tool),
                       outcome_unknown=True, approval_seconds=waited)
    if not outcome.ok:
        # The server names the rejected field first ("patient_id may hold only ..."); the
        # error handler asks the clinician about a patient ID the record refused. Only a tool
        # that takes a patient ID can refuse one: any other text naming it changes nothing.
        fields = ["patient_id"] if outcome.error_type == "invalid_args" and "patient_id" in clean \
            and "patient_id" in (outcome.message or "") else None
        return replace(_error_result(tool, clean, outcome.error_type, outcome.message, fields, seconds=seconds),
                       approval_seconds=waited)
    try:
        formatted = format_result(tool, outcome.result or {})
        json.dumps(outcome.result)
    except (TypeError, ValueError, KeyError):
        return replace(_error_result(tool, clean, "invalid_response", "result was not JSON-shaped", seconds=seconds),
                       approval_seconds=waited)
    return _with_safety(ToolResult(
        tool_name=tool, tool_label=TOOL_LABELS[tool], args=clean, result=outcome.result,
        formatted_result=formatted, seconds=seconds, approval_seconds=waited,
    ), report, approved)


UNKNOWN_WRITE = ("The {tool_label} was sent but not confirmed: the record may or may not have been changed: "
                 "check the chart before trying again.")


def unknown_write_message(tool: str) -> str:
    """What the clinician reads when a write's outcome is unknown (it is never retried)."""
    return UNKNOWN_WRITE.format(tool_label=TOOL_LABELS[tool])


def _readable(result) -> bool:
    try:
        json.dumps(result)
        return isinstance(result, dict) or result is None
    except (TypeError, ValueError):
        return False


PRESCRIBE = "prescribe_medication"
MAX_APPROVAL_ROUNDS = 3
# What a refusal by the safety policy tells the clinician to do (each door asks for the same).
HOW_TO_OVERRIDE = "approve it again as an override, with a reason of real words and your password"
# The safety gate: validated prescription arguments -> appliance.safety.SafetyReport.
SafetyGate = Callable[[dict], Any]


def _with_safety(result: ToolResult, report, approved: dict | None = None) -> ToolResult:
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


def image_result(state: AgentState, args: dict | None) -> ToolResult:
    """analyze_medical_image answers from this turn's image analysis (INPUT_ASSEMBLY ran it on
    the attached image): the findings, or why there are none. No image is ever described twice
    or from imagination."""
    tool = "analyze_medical_image"
    clean, error_type, missing = validate_args(tool, args)
    if error_type:
        return _error_result(tool, args or {}, error_type, "arguments failed validation", missing)
    if state.image_findings:
        return ToolResult(tool_name=tool, tool_label=TOOL_LABELS[tool], args=clean, result=dict(state.image_findings),
                          formatted_result=format_result(tool, dict(state.image_findings)))
    if state.image_path is None:
        return _error_result(tool, clean, "missing_required_args", "no image attached", ["an attached image"])
    return _error_result(tool, clean, "service_unavailable", "the image could not be analysed")


def run(state: AgentState, tools: ToolBox, approver: Approver, deadline: float,
        safety_gate: SafetyGate | None = None,
        known_drug: Callable[[str], bool] | None = None) -> tuple[dict, ToolResult]:
    if state.current_tool == "analyze_medical_image":
        result = image_result(state, state.current_args)
    else:
        result = execute(state.current_tool, state.current_args, tools, approver, deadline,
                         grounded_patient_ids(state, for_write=state.current_tool in WRITE_TOOLS),
                         clinician_text(state), state.extracted_entities.drugs_named, safety_gate, known_drug,
                         read=model_read(state))
    update = {
        "tool_results": [result],
        "step_count": state.step_count + 1,
        "current_args": result.args,
    }
    return update, result
