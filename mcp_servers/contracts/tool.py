"""A tool as one record (``Tool``), the registry of records, and the tables read off it.

Invariants:
- A tool is one ``Tool``: its name, the server that answers it, its argument model (the schema
  the model fills and, through ``mcp_servers.serving.serves``, the signature the server checks),
  whether it writes and how a write is approved, its clinician-facing label and description, how
  its result is shown and what it needs from the clinician's words. Nothing else names a tool's
  properties: every table (``ARG_SCHEMAS``, ``TOOL_LABELS``, ``WRITE_TOOLS`` ...) is a live view
  of the registry, so a record registered later shows in every table at once. The agent builds
  its prompts when its modules load: the records are registered before that (``catalogue`` at
  the import of ``mcp_servers.contracts``).
- A name is registered once. Whether a tool writes is its approval rule (a read's is "none").
- A record names only fields of its own argument model, and only a write takes a sig.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Set
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from mcp_servers.contracts.hidden import (
    APPROVAL,
    IDEMPOTENCY_KEY,
    SIG,
    ApprovalArg,
    IdempotencyKey,
    SigArg,
)

# How a tool call is let through: "none" for a read; "clinician" for a write the clinician
# approves; "clinician_after_safety" for a write that makes an order active, which the
# medication safety gate checks before the clinician sees it (docs/design.md §13).
ApprovalRule = Literal["none", "clinician", "clinician_after_safety"]
# "local": answered in the agent process (it needs the models, not a data source).
Server = Literal["ehr", "knowledge", "local"]


@dataclass(frozen=True)
class Tool:
    """One agent tool (docs/design.md §12)."""

    name: str
    server: Server
    args: type[BaseModel]  # what the model fills (TOOL_SELECT stage 2) and the server checks
    label: str  # the clinician-facing name: tool names never reach the model's answer or the clinician
    description: str  # TOOL_SELECT stage 1: what it does, when to use it (the signature is read off ``args``)
    example: str  # one example request, shown with the description
    approval: ApprovalRule = "none"
    sig: bool = False  # a write that also takes the order's sig as code read it (``hidden.SIG``)
    # Write fields whose values must be the clinician's own words (the grammar makes the model
    # fill every field, so a value nobody said would otherwise reach the approval dialog) ...
    said_fields: tuple[str, ...] = ()
    keeps_when_null: tuple[str, ...] = ()  # ... unless null: the record keeps its own value
    free_text_fields: tuple[str, ...] = ()  # may not copy what the model read this turn
    brief: bool = False  # the answer keeps to the most critical findings of its result
    dictated: bool = False  # its arguments carry dictated text: TOOL_SELECT stage 2 is never cut short
    idempotent: bool = False  # the same call gives the same answer (MCP idempotentHint)
    # Other MCP clients may omit a nullable argument (it is then null); the agent sends every one.
    nulls_optional: bool = False

    def __post_init__(self) -> None:
        fields = set(self.args.model_fields)
        named = set(self.said_fields) | set(self.keeps_when_null) | set(self.free_text_fields)
        if not named <= fields:
            raise ValueError(f"{self.name}: {sorted(named - fields)} are not arguments of {self.args.__name__}")
        if self.sig and not self.write:
            raise ValueError(f"{self.name}: only a write takes a sig")

    @property
    def write(self) -> bool:
        """Whether the tool changes the record (and so runs only after approval)."""
        return self.approval != "none"

    @property
    def full_description(self) -> str:
        """The description for TOOL_SELECT stage 1, after the signature read off the argument model."""
        return f"{self.name}({', '.join(self.args.model_fields)}) - {self.description}"

    @property
    def needs_patient(self) -> bool:
        """Whether a call names a patient (the agent grounds the ID before any call)."""
        return "patient_id" in self.args.model_fields

    @property
    def hidden_params(self) -> dict[str, Any]:
        """The parameters code sets after approval, never the model: name -> annotation."""
        if not self.write:
            return {}
        params = {IDEMPOTENCY_KEY: IdempotencyKey, APPROVAL: ApprovalArg}
        return {**params, SIG: SigArg} if self.sig else params

    @property
    def annotations(self) -> dict[str, Any]:
        """The MCP annotations of the server's tool."""
        hints: dict[str, Any] = {"title": self.label, "readOnlyHint": not self.write, "openWorldHint": False}
        if self.write:
            return {**hints, "destructiveHint": False, "idempotentHint": False}
        return {**hints, "idempotentHint": True} if self.idempotent else hints


_REGISTRY: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    """Add ``tool`` to the registry (every table shows it from now on); returns it."""
    if tool.name in _REGISTRY:
        raise ValueError(f"tool {tool.name} is registered already")
    _REGISTRY[tool.name] = tool
    return tool


def tool_record(name: str) -> Tool:
    """The record of ``name`` (KeyError for a name no record has)."""
    return _REGISTRY[name]


class ToolTable(Mapping[str, Any]):
    """A read-only table ``name -> value`` read off the records, live: in registration order,
    keeping the tools ``keep`` accepts."""

    def __init__(self, value: Callable[[Tool], Any], keep: Callable[[Tool], bool] = lambda t: True):
        self._value, self._keep = value, keep

    def __getitem__(self, name: str) -> Any:
        tool = _REGISTRY[name]
        if not self._keep(tool):
            raise KeyError(name)
        return self._value(tool)

    def __iter__(self) -> Iterator[str]:
        return (name for name, tool in list(_REGISTRY.items()) if self._keep(tool))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"ToolTable({dict(self)!r})"


class ToolSet(Set[str]):
    """The names of the tools ``keep`` accepts, live."""

    def __init__(self, keep: Callable[[Tool], bool]):
        self._keep = keep

    @classmethod
    def _from_iterable(cls, names) -> frozenset[str]:  # what set operators (``|``, ``&``) return
        return frozenset(names)

    def __contains__(self, name: object) -> bool:
        tool = _REGISTRY.get(name) if isinstance(name, str) else None
        return tool is not None and self._keep(tool)

    def __iter__(self) -> Iterator[str]:
        return (name for name, tool in list(_REGISTRY.items()) if self._keep(tool))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"ToolSet({sorted(self)!r})"


TOOLS: Mapping[str, Tool] = ToolTable(lambda t: t)
