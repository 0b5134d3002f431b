"""The tool-calling interface the graph depends on, and write approval.

Invariant: a ``ToolOutcome`` is either a result dict or an error type from
``mcp_servers.contracts.ERROR_TYPES`` with the server's text; exceptions from transports are
converted before they reach the graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolOutcome:
    result: dict | None = None
    error_type: str | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_type is None


class ToolBox(Protocol):
    def call(self, tool: str, args: dict, deadline: float) -> ToolOutcome: ...

    def drug_names(self) -> list[str]: ...


@dataclass(frozen=True)
class Approval:
    approved: bool
    args: dict = field(default_factory=dict)
    reason: str | None = None


class Approver(Protocol):
    """Called before any write tool runs, with the tool name, the exact arguments and, for a
    prescription, the medication safety report code made from the chart (None otherwise)."""

    def __call__(self, tool: str, args: dict, safety: Any = None) -> Approval: ...


def deny_all(tool: str, args: dict, safety: Any = None) -> Approval:
    """The default: no write runs unless someone approved it."""
    return Approval(False, args, "writes are not enabled for this run")


def approve_all(tool: str, args: dict, safety: Any = None) -> Approval:
    """For scripted runs where the operator approved writes up front and nothing is prescribed
    against a safety finding (``appliance.safety.headless`` adds the gate's refusal)."""
    return Approval(True, args)
