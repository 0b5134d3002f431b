"""Node 4, TOOL_EXECUTE (deterministic): validate, ground, approve writes through the hook, call,
shape the result (docs/design.md §4.4).

Invariants:
- Arguments are validated against the tool contract and grounded in the clinician's words and
  the turn's results before any call (``appliance.agent.grounding``); invalid or ungrounded
  arguments never reach a server, and the clinician is asked instead.
- A change of an order on the chart (``order_gate``) is looked up on the chart before the
  approver is asked: no such order, or two alike, is said or asked, never approved blind.
- Write tools run only after the approval hook (``appliance.agent.write_approval``: the front
  end's approver, then the one safety policy) approved them, with the arguments it approved; a
  rejection is an error result and nothing is written. An approved order carries the sig code
  read from the approved arguments (``contracts.SIG``) and its approval record.
- Each approved write carries an idempotency key made here (a fresh uuid4 per approval, never
  the model's), which the record enforces. A write whose outcome is unknown (a timeout, a
  connection lost mid-call, an unreadable answer) says the record may or may not have been
  changed, and is never retried (``error_handler``).
- Results and errors are shaped by ``appliance.agent.tool_results``: clinical labels,
  pre-formatted clinician-safe errors, the raw text for the trace only.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from appliance.agent.grounding import (
    Grounding,
    clinician_text,
    copied_fields,
    grounded_patient_ids,
    grounding_problem,
    model_read,
    ungrounded_fields,
    validate_args,
)
from appliance.agent.order_gate import order_problem, with_sig
from appliance.agent.state import AgentState, Node, NodeResult, ToolResult
from appliance.agent.tool_results import (
    error_result,
    format_result,
    readable,
    summarize_result,
    unknown_write_message,
    with_safety,
)
from appliance.agent.write_approval import Approved, SafetyGate, WriteApproval
from appliance.tools.base import Approver, ToolBox, ToolOutcome
from mcp_servers.contracts import TOOL_LABELS, WRITE_TOOLS

# Names the tests and tools import from here (the executor's helpers live in their own modules).
__all__ = ["Grounding", "WriteApproval", "call_tool", "clinician_text", "copied_fields", "execute",
           "grounded_patient_ids", "image_result", "model_read", "run", "summarize_result",
           "ungrounded_fields", "unknown_write_message", "validate_args"]


def execute(tool: str, args: dict | None, tools: ToolBox, approver: Approver, deadline: float,
            grounding: Grounding | None = None, *, safety_gate: SafetyGate | None = None) -> ToolResult:
    """Run one tool call with ``approver`` as the front end's approver (``WriteApproval`` adds
    the safety gate's report and the one safety policy). Without ``grounding`` (direct calls
    from tests and tools) no grounding check is made."""
    return call_tool(tool, args, tools, deadline, WriteApproval(approver, tools, deadline, safety_gate), grounding)


def call_tool(tool: str, args: dict | None, tools: ToolBox, deadline: float,
              approve: Callable[..., Approved | ToolResult], grounding: Grounding | None = None) -> ToolResult:
    """The executor: validate, ground, ask the approval hook (writes only), call, shape."""
    args = args or {}
    clean, error_type, missing = validate_args(tool, args)
    if error_type:
        return error_result(tool, args, error_type, "arguments failed validation", missing)
    if grounding is not None and (refused := grounding_problem(tool, clean, grounding)) is not None:
        return refused
    problem = order_problem(tool, clean, tools, deadline)  # a change of an order the chart does not show once
    if problem is not None:
        result = error_result(tool, clean, problem[0], problem[1])
        return replace(result, error=problem[1], formatted_result=problem[1])
    waited, approved = None, None
    if tool in WRITE_TOOLS:
        asked = time.perf_counter()
        approved = approve(tool, clean, grounding.patient_ids if grounding is not None else None)
        waited = time.perf_counter() - asked
        if not isinstance(approved, Approved):  # rejected: by the clinician, the policy, or an edit
            return replace(approved, approval_seconds=waited)
        clean = approved.args
    return _call(tool, clean, tools, deadline, approved, waited)


def _call(tool: str, clean: dict, tools: ToolBox, deadline: float, approved: Approved | None,
          waited: float | None) -> ToolResult:
    started = time.perf_counter()
    if approved is not None:  # one key per approved write: the record performs it at most once
        outcome: ToolOutcome = tools.call(tool, with_sig(tool, clean), deadline, idempotency_key=str(uuid.uuid4()),
                                          approval=approved.record)
    else:
        outcome = tools.call(tool, clean, deadline)
    seconds = time.perf_counter() - started
    if tool in WRITE_TOOLS and (outcome.uncertain or (outcome.ok and not readable(outcome.result))):
        raw = outcome.message if not outcome.ok else "result was not JSON-shaped"
        result = error_result(tool, clean, outcome.error_type or "invalid_response", raw, seconds=seconds)
        return replace(result, error=unknown_write_message(tool), formatted_result=unknown_write_message(tool),
                       outcome_unknown=True, approval_seconds=waited)
    if not outcome.ok:
        # The server names the rejected field first ("patient_id may hold only ..."); the
        # error handler asks the clinician about a patient ID the record refused. Only a tool
        # that takes a patient ID can refuse one: any other text naming it changes nothing.
        fields = ["patient_id"] if outcome.error_type == "invalid_args" and "patient_id" in clean \
            and "patient_id" in (outcome.message or "") else None
        return replace(error_result(tool, clean, outcome.error_type, outcome.message, fields, seconds=seconds),
                       approval_seconds=waited)
    try:
        formatted = format_result(tool, outcome.result or {})
        json.dumps(outcome.result)
    except (TypeError, ValueError, KeyError):
        return replace(error_result(tool, clean, "invalid_response", "result was not JSON-shaped", seconds=seconds),
                       approval_seconds=waited)
    result = ToolResult(tool_name=tool, tool_label=TOOL_LABELS[tool], args=clean, result=outcome.result,
                        formatted_result=formatted, seconds=seconds, approval_seconds=waited)
    if approved is None:
        return result
    return with_safety(result, approved.report, approved.record)


def image_result(state: AgentState, args: dict | None) -> ToolResult:
    """analyze_medical_image answers from this turn's image analysis (INPUT_ASSEMBLY ran it on
    the attached image): the findings, or why there are none. No image is ever described twice
    or from imagination."""
    tool = "analyze_medical_image"
    clean, error_type, missing = validate_args(tool, args)
    if error_type:
        return error_result(tool, args or {}, error_type, "arguments failed validation", missing)
    if state.image_findings:
        return ToolResult(tool_name=tool, tool_label=TOOL_LABELS[tool], args=clean, result=dict(state.image_findings),
                          formatted_result=format_result(tool, dict(state.image_findings)))
    if state.image_path is None:
        return error_result(tool, clean, "missing_required_args", "no image attached", ["an attached image"])
    return error_result(tool, clean, "service_unavailable", "the image could not be analysed")


def run(state: AgentState, tools: ToolBox, approve: WriteApproval, deadline: float,
        known_drug: Callable[[str], bool] | None = None) -> NodeResult:
    """The call's result on the state (``tool_results``); next RESULT_CLASSIFY."""
    if state.current_tool == "analyze_medical_image":
        result = image_result(state, state.current_args)
    else:
        grounding = Grounding.of(state, state.current_tool, known_drug)
        result = call_tool(state.current_tool, state.current_args, tools, deadline, approve, grounding)
    update = {
        "tool_results": [result],
        "step_count": state.step_count + 1,
        "current_args": result.args,
    }
    output: dict = {"error_type": result.error_type}
    if result.approval_seconds is not None:  # the clinician's time in the approval dialog, apart
        output["approval_seconds"] = round(result.approval_seconds, 4)
    if result.safety is not None:  # what the medication safety gate found, as audited
        output["safety"] = result.safety
    return NodeResult(update, output, Node.RESULT_CLASSIFY, model_call=False, tool=result.tool_name, args=result.args,
                      result_summary=result.error or summarize_result(result.result))
