"""What the record keeps of a write's approval or rejection, made by code in TOOL_EXECUTE.

Invariants:
- An approved write carries its approval (``approval_record``, sent as ``contracts.APPROVAL``),
  which the record keeps in the write's own audit row: "override" when the safety policy decided
  one (``appliance.safety.policy.decide``: a report that needed an override, a reason of real
  words, the password given again), else "approval"; who decided (``Approval.clinician``); the
  safety report's audit entry, with the override reason, or None when no safety check ran.
- A write the approver refused is recorded as a "rejection" event (``record_rejection``) with
  the tool, who decided, their reason and the safety report. Recording never raises and never
  changes the rejection: nothing is written either way, and a failure is logged by kind only.
- Both fit the record's bound (``contracts.MAX_AUDIT_JSON_CHARS``): the safety entry is fitted
  (``appliance.safety.report.fit_audit``) and a reason cut at ``MAX_REASON_CHARS``, so a long
  chart never makes the record refuse an approved write.
- Nothing here logs patient data.
"""

from __future__ import annotations

import logging
from typing import Any

from appliance.safety.policy import PolicyDecision
from appliance.safety.report import SafetyReport, fit_audit
from appliance.tools.base import Approval, ToolBox
from mcp_servers.contracts import MAX_AUDIT_JSON_CHARS

log = logging.getLogger(__name__)

MAX_REASON_CHARS = 2000
# The safety entry's share of the record's bound; the rest is room for the decision, who and why.
SAFETY_AUDIT_CHARS = MAX_AUDIT_JSON_CHARS - 2 * MAX_REASON_CHARS


def safety_audit(report: SafetyReport | None, override_reason: str | None = None) -> dict[str, Any] | None:
    """The report's audit entry, fitted to the record's bound; None when no check ran."""
    if report is None:
        return None
    return fit_audit(report.to_audit(override_reason), SAFETY_AUDIT_CHARS)


def approval_record(approval: Approval, decision: PolicyDecision | None) -> dict[str, Any]:
    """The approval an approved write carries to the record (``contracts.ApprovalRecord``):
    the policy's decision (``appliance.safety.policy.decide``; None when no safety check ran),
    and with an override the password given again, which a clinic host checks itself."""
    record = {
        "decision": "override" if decision is not None and decision.kind == "override" else "approval",
        "clinician": approval.clinician or None,
        "safety": None if decision is None or decision.audit is None else fit_audit(decision.audit, SAFETY_AUDIT_CHARS),
    }
    if record["decision"] == "override" and approval.password:
        record["password"] = approval.password
    return record


def rejection_details(tool: str, approval: Approval, report: SafetyReport | None) -> dict[str, Any]:
    """The details of a "rejection" event: the tool, who refused, why, and what the gate found."""
    reason = (approval.reason or "").strip()
    return {
        "tool": tool,
        "clinician": approval.clinician or None,
        "reason": reason[:MAX_REASON_CHARS] or None,
        "safety": safety_audit(report),
    }


def record_rejection(tools: ToolBox, tool: str, patient_id: str | None, approval: Approval,
                     report: SafetyReport | None, deadline: float) -> None:
    """Record a refused write on the record's audit log; never raises (see the module docstring)."""
    try:
        outcome = tools.record_event("rejection", patient_id, rejection_details(tool, approval, report), deadline)
    except Exception as exc:  # noqa: BLE001 - the rejection stands whatever recording it does
        log.warning("the rejection of a %s call was not recorded (%s)", tool, type(exc).__name__)
        return
    if not outcome.ok:
        log.warning("the rejection of a %s call was not recorded (%s)", tool, outcome.error_type)
