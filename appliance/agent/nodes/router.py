"""Node 6, DETERMINISTIC_ROUTER (code only): every "what next" decision (docs/design.md §9, §11).

Invariants:
- A pure function of the state and limits; no model call, no I/O.
- Whether the task is complete and which steps remain are ``appliance.agent.progress``'s
  answers (re-exported here): the model never judges sufficiency.

Choices beyond the seed (docs/design.md §14): a
patient search with zero matches ends the loop (nothing further can be looked up); the error
path is taken when the call failed (code knows), not when the model labels a successful result
as an error (that label is overruled and recorded in the reason).
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.agent.progress import (
    Limits,
    handled_tools,
    is_duplicate_call,
    patient_id_known,
    required_tools,
    steps_not_done,
    task_status,
)
from appliance.agent.state import AgentState, Node, NodeResult, RouterDecision

__all__ = ["Limits", "Route", "clarification_for_matches", "handled_tools", "is_duplicate_call", "patient_id_known",
           "required_tools", "route", "run", "steps_not_done", "task_status"]

ERROR_QUALITIES = ("error_retryable", "error_fatal")
DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Route:
    next: Node  # TOOL_SELECT, ERROR_HANDLER or SYNTHESIZE
    reason: str
    clarification: str | None = None
    strict_selection: bool = False


def clarification_for_matches(result: dict, name: str) -> str:
    lines = [
        f"- {m.get('name', '?')}, born {m.get('birth_date') or 'unknown'}, ID {m.get('patient_id')}"
        for m in result.get("matches", [])
    ]
    n = result.get("total_matches", len(lines))
    return f"I found {n} patients matching '{name}'. Which one did you mean?\n" + "\n".join(lines)


def run(state: AgentState, limits: Limits = DEFAULT_LIMITS) -> NodeResult:
    """``route``'s decision as a node result: recorded, with the clarification for several
    matches, and the per-tool retry count back to 0 for a new tool."""
    decision = route(state, limits)
    update: dict = {"router_decisions": [RouterDecision(Node.DETERMINISTIC_ROUTER, decision.next, decision.reason)],
                    "strict_selection": decision.strict_selection}
    if decision.clarification:
        update["clarification_request"] = decision.clarification
    if decision.next is Node.TOOL_SELECT and not decision.strict_selection:
        update["retry_count"] = 0
    return NodeResult(update, {}, decision.next, reason=decision.reason, model_call=False)


def route(state: AgentState, limits: Limits = DEFAULT_LIMITS) -> Route:
    last = state.last_tool_result
    if state.current_tool == "none":
        complete, why = task_status(state, limits)
        if complete:
            return Route(Node.SYNTHESIZE, f"no further tool proposed and {why}")
        return Route(Node.TOOL_SELECT, f"no further tool proposed, but {why}", strict_selection=True)
    if last is None:
        return Route(Node.SYNTHESIZE, "no tool has run")
    if last.error_type is not None:
        return Route(Node.ERROR_HANDLER, f"the last result was an error ({last.error_type})")
    overruled = ""
    if state.last_result_classification in ERROR_QUALITIES:
        # Code knows the call succeeded and returned data; retrying it would repeat a good call.
        overruled = f"the source answered (labelled {state.last_result_classification}, overruled); "
    if last.tool_name == "search_patient" and last.result:
        total = last.result.get("total_matches", 0)
        if total > 1:
            return Route(
                Node.SYNTHESIZE, f"{total} patients match; asking the clinician which one",
                clarification=clarification_for_matches(last.result, last.args.get("name", "")),
            )
        if total == 0:
            return Route(Node.SYNTHESIZE, "no patient matched; nothing further can be looked up")
    complete, why = task_status(state, limits)
    return Route(Node.SYNTHESIZE if complete else Node.TOOL_SELECT, overruled + why)
