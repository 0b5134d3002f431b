"""The tool-calling interface the graph depends on, and write approval.

Invariants:
- A ``ToolOutcome`` is either a result dict or an error type from
  ``mcp_servers.contracts.ERROR_TYPES`` with the server's text; exceptions from transports are
  converted before they reach the graph.
- ``uncertain`` marks an outcome that does not say whether the server acted (the request may
  have reached it: a timeout, a connection lost mid-call, an unreadable answer); for a write,
  the record may or may not have been changed.
- A write is called with an ``idempotency_key`` made by code, one per approved write; the
  record performs a key once, whatever reaches it how often (``ehr_db.repository``). It also
  carries its ``approval`` (``contracts.ApprovalRecord``: approval or override, who decided,
  the safety report), which the record keeps in the write's own audit row.
- A rejected write is recorded with ``record_event`` (kind "rejection") on the record's audit
  log; the model never calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolOutcome:
    result: dict | None = None
    error_type: str | None = None
    message: str | None = None
    uncertain: bool = False  # the server may have acted: the outcome is unknown (see above)

    @property
    def ok(self) -> bool:
        return self.error_type is None


class ToolBox(Protocol):
    def call(self, tool: str, args: dict, deadline: float, *, idempotency_key: str | None = None,
             approval: dict | None = None) -> ToolOutcome:
        """Call ``tool``; ``idempotency_key`` and ``approval`` are given for approved writes only
        (never by the model)."""

    def record_event(self, kind: str, patient_id: str | None, details: dict, deadline: float) -> ToolOutcome:
        """Append a decision that is not a write (``contracts.AuditEventKind``) to the record's audit log."""

    def drug_names(self) -> list[str]: ...


@dataclass(frozen=True)
class Approval:
    approved: bool
    args: dict = field(default_factory=dict)
    reason: str | None = None
    # Who decided: the signed-in clinician's account name (the operator when no accounts exist),
    # for the record of approvals, rejections and overrides; None when no one was asked.
    clinician: str | None = None
    # Why a safety report that needs an override was approved anyway; set only then (headless:
    # the operator's --override-safety reason), and kept in the write's audit row. Whether it is
    # enough is ``appliance.safety.policy.decide``'s to say, at every door.
    override_reason: str | None = None
    # The clinician's password given again for an override: True right, False missing or wrong,
    # None where the appliance has no clinician accounts. ``password`` is what was typed, sent
    # only with an override so a clinic host checks it itself; never shown, logged or kept.
    reauthenticated: bool | None = False
    password: str | None = field(default=None, repr=False, compare=False)


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


def signed_by(approver: Approver, clinician: str) -> Approver:
    """``approver`` whose every decision carries ``clinician`` (see ``Approval.clinician``)."""
    def signed(tool: str, args: dict, safety: Any = None) -> Approval:
        return replace(approver(tool, args, safety=safety), clinician=clinician)

    return signed
