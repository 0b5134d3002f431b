"""Typed agent state (docs/design.md §5) and the trace a turn emits.

Invariants:
- Nodes never mutate the state they are given: they return an update that ``AgentState.merge``
  applies, appending to the accumulating lists (tool_results, error_messages, calls).
- ``ToolResult.formatted_result`` and ``ToolResult.error`` are clinician-facing text with
  clinical labels; ``raw_error`` is kept for the trace only and never reaches a prompt.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Lists that accumulate across the turn; every other field is replaced by an update.
_APPENDED = ("tool_results", "error_messages", "router_decisions")


class Node(StrEnum):
    """The graph's nodes (docs/design.md §2). A value is the node's name wherever it is written: the
    trace and ``path``, the node argument of model calls, and the keys of a scripted run."""

    INPUT_ASSEMBLY = "INPUT_ASSEMBLY"
    INTENT_CLASSIFY = "INTENT_CLASSIFY"
    TOOL_SELECT = "TOOL_SELECT"
    TOOL_EXECUTE = "TOOL_EXECUTE"
    RESULT_CLASSIFY = "RESULT_CLASSIFY"
    DETERMINISTIC_ROUTER = "DETERMINISTIC_ROUTER"
    ERROR_HANDLER = "ERROR_HANDLER"
    SYNTHESIZE = "SYNTHESIZE"


NODE_LABELS: dict[Node, str] = {
    Node.INPUT_ASSEMBLY: "Reading the request",
    Node.INTENT_CLASSIFY: "Understanding the question",
    Node.TOOL_SELECT: "Choosing a source",
    Node.TOOL_EXECUTE: "Consulting a source",
    Node.RESULT_CLASSIFY: "Checking the result",
    Node.DETERMINISTIC_ROUTER: "Deciding the next step",
    Node.ERROR_HANDLER: "Handling a problem",
    Node.SYNTHESIZE: "Writing the answer",
}


@dataclass(frozen=True)
class ExtractedEntities:
    patient_ids: tuple[str, ...] = ()
    patient_names: tuple[str, ...] = ()
    drug_mentions: tuple[str, ...] = ()  # generic names, this message
    action_verbs: tuple[str, ...] = ()
    has_image: bool = False
    # Generic names of the drugs the clinician named in this message or the recent exchanges:
    # a write's drug may be the generic of the brand they wrote (tool_execute's grounding).
    drugs_named: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    tool_name: str
    tool_label: str
    args: dict
    result: dict | None
    formatted_result: str
    error: str | None = None  # pre-formatted, clinician-safe
    error_type: str | None = None
    raw_error: str | None = None  # for the trace only
    missing_fields: tuple[str, ...] = ()
    invalid_fields: tuple[str, ...] = ()  # arguments refused as malformed (invalid_args)
    seconds: float = 0.0
    approval_seconds: float | None = None  # a write's wait for the clinician's decision
    safety: dict | None = None  # a prescription's safety report (appliance.safety), as audited
    outcome_unknown: bool = False  # a write that may or may not have reached the record (never retried)

    def signature(self) -> str:
        return self.tool_name + json.dumps(self.args, sort_keys=True)


@dataclass(frozen=True)
class RouterDecision:
    node: Node  # DETERMINISTIC_ROUTER or ERROR_HANDLER
    next: Node
    reason: str


@dataclass(frozen=True)
class AgentState:
    # input
    user_query: str
    conversation_history: tuple[tuple[str, str], ...] = ()
    extracted_entities: ExtractedEntities = ExtractedEntities()
    image_path: str | None = None
    image_findings: dict | None = None
    selected_patient_id: str | None = None
    # the clinician's words as INPUT_ASSEMBLY read them, once (``reading.request``); None in a
    # state built by hand, whose words are then read where they are needed
    reading: Any = None  # a ``reading.request.RequestReading`` (not imported: the reading imports this module)
    # the look-ups code read in the clinician's words (``knowledge_requests.KnowledgeCall``), in order
    knowledge_calls: tuple = ()
    drug_data_size: int | None = None  # drugs the local drug data holds, for "not in the data" answers
    # intent
    intent: str | None = None
    task_summary: str = ""
    suggested_tool: str | None = None
    # tool loop
    current_tool: str | None = None
    current_args: dict | None = None
    tool_results: tuple[ToolResult, ...] = ()
    step_count: int = 0
    retry_count: int = 0
    total_retries: int = 0
    retry_mode: str | None = None  # "retry_same" | "retry_different_args" while a retry is pending
    strict_selection: bool = False  # set when the router refused a "none" selection
    skipped_tools: tuple[str, ...] = ()
    # result classification
    last_result_classification: str | None = None
    last_result_summary: str | None = None
    # errors and clarification
    error_messages: tuple[str, ...] = ()
    clarification_request: str | None = None
    router_decisions: tuple[RouterDecision, ...] = ()
    # synthesis
    final_response: str | None = None

    def merge(self, update: dict[str, Any]) -> AgentState:
        changes = {}
        for key, value in update.items():
            if key in _APPENDED:
                changes[key] = getattr(self, key) + tuple(value)
            else:
                changes[key] = value
        return dataclasses.replace(self, **changes)

    @property
    def last_tool_result(self) -> ToolResult | None:
        return self.tool_results[-1] if self.tool_results else None


@dataclass(frozen=True)
class NodeResult:
    """What every node's ``run`` returns: the state update, the trace event's output, and the
    node to run next (None ends the turn). ``reason`` is a routing decision's reason (router,
    error handler); ``model_call`` whether the node called the model (its token counts then go
    to the trace); ``tool``, ``args`` and ``result_summary`` the call it chose or made."""

    update: dict[str, Any]
    output: dict[str, Any]
    next: Node | None
    reason: str | None = None
    model_call: bool = True
    tool: str | None = None
    args: dict | None = None
    result_summary: str | None = None


@dataclass
class TraceEvent:
    node: str  # a Node's value, as plain text (events are also read back from saved sessions)
    label: str
    seconds: float
    output: dict = field(default_factory=dict)
    tool: str | None = None
    args: dict | None = None
    result_summary: str | None = None
    decision: str | None = None
    reason: str | None = None
    model_stats: dict | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
