"""Builders for agent states in table tests."""

from __future__ import annotations

from appliance.agent.state import AgentState, ExtractedEntities, ToolResult
from appliance.tools.base import Approval
from mcp_servers.contracts import TOOL_LABELS


def ok(tool: str, result: dict | None = None, **args) -> ToolResult:
    return ToolResult(tool, TOOL_LABELS[tool], args, result or {"data": 1}, f"[{TOOL_LABELS[tool]}] ok")


def err(tool: str, error_type: str, missing: tuple[str, ...] = (), **args) -> ToolResult:
    msg = f"{TOOL_LABELS[tool]} failed ({error_type})"
    return ToolResult(tool, TOOL_LABELS[tool], args, None, msg, error=msg, error_type=error_type, missing_fields=missing)


def state(query: str = "q", results=(), quality: str | None = "success_rich", ids=(), names=(), **kw) -> AgentState:
    results = tuple(results)
    return AgentState(
        user_query=query,
        extracted_entities=ExtractedEntities(patient_ids=tuple(ids), patient_names=tuple(names)),
        tool_results=results,
        step_count=kw.pop("step_count", len(results)),
        current_tool=results[-1].tool_name if results else None,
        last_result_classification=quality,
        **kw,
    )


OVERRIDE_REASON = "reviewed at the bedside by the prescriber"


def approve_as_override(tool: str, args: dict, safety=None) -> Approval:
    """A clinician who approves every write and, where the safety policy asks for it, overrides
    with a reason and the password given again: for routing tests whose scripted tool boxes
    answer no chart, so the gate's checks do not run and every prescription needs an override."""
    return Approval(True, args, OVERRIDE_REASON, override_reason=OVERRIDE_REASON, reauthenticated=True)
