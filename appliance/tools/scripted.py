"""Scripted tool outcomes for routing tests: a queue per tool in front of a real ToolBox.

Invariants:
- A tool with no scripted outcome left is called for real, so a script only overrides what it
  names.
- ``calls`` holds the tool calls only (tool, arguments), as the model's route made them; the
  hidden parts of a write (its key, its approval) and audit events are kept apart
  (``idempotency_keys``, ``approvals``, ``audit_events``). Audit events always go to the real
  tool box when there is one.
"""

from __future__ import annotations

from collections import deque

from appliance.errors import ScriptError
from appliance.tools.base import ToolBox, ToolOutcome
from mcp_servers.contracts import ERROR_TYPES


def outcome_from_json(item: dict) -> ToolOutcome:
    if not isinstance(item, dict) or not ({"result", "error_type"} & set(item)):
        raise ScriptError('a scripted tool outcome needs "result" or "error_type"')
    if "error_type" in item:
        if item["error_type"] not in ERROR_TYPES:
            raise ScriptError(f"unknown error_type {item['error_type']!r} in script")
        # A scripted timeout stands for a real one: whether the server acted is unknown.
        return ToolOutcome(error_type=item["error_type"], message=item.get("message", ""),
                           uncertain=item["error_type"] == "timeout")
    if not isinstance(item["result"], dict):
        raise ScriptError("a scripted tool result must be a JSON object")
    return ToolOutcome(result=item["result"])


class ScriptedToolBox:
    def __init__(self, scripted: dict[str, list[dict]], fallback: ToolBox | None, drug_names: list[str] | None = None):
        self._queues = {tool: deque(outcome_from_json(i) for i in items) for tool, items in scripted.items()}
        self._fallback = fallback
        self._drug_names = drug_names
        self.calls: list[tuple[str, dict]] = []
        self.idempotency_keys: list[str] = []  # the keys writes were called with, in order
        self.approvals: list[dict] = []  # the approvals writes were called with, in order
        self.audit_events: list[tuple[str, str | None, dict]] = []  # (kind, patient_id, details)

    def call(self, tool: str, args: dict, deadline: float, *, idempotency_key: str | None = None,
             approval: dict | None = None) -> ToolOutcome:
        self.calls.append((tool, dict(args)))
        if idempotency_key is not None:
            self.idempotency_keys.append(idempotency_key)
        if approval is not None:
            self.approvals.append(approval)
        queue = self._queues.get(tool)
        if queue:
            return queue.popleft()
        if self._fallback is None:
            raise ScriptError(f"no scripted outcome left for {tool} and no real tools to fall back on")
        return self._fallback.call(tool, args, deadline, idempotency_key=idempotency_key, approval=approval)

    def record_event(self, kind: str, patient_id: str | None, details: dict, deadline: float) -> ToolOutcome:
        """Kept in ``audit_events``; recorded for real when there are real tools (nothing is
        scripted for it), else taken as recorded."""
        self.audit_events.append((kind, patient_id, details))
        if self._fallback is None:
            return ToolOutcome(result={"kind": kind})
        return self._fallback.record_event(kind, patient_id, details, deadline)

    def drug_names(self) -> list[str]:
        if self._drug_names is not None:
            return list(self._drug_names)
        return self._fallback.drug_names() if self._fallback else []
