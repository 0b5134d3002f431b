"""Write approval: the hook TOOL_EXECUTE calls before a write (docs/design.md §13).

The front ends supply the approver (the terminal's dialog, the line session's prompt, the
headless operator's answers: ``appliance.tools.base.Approver``); ``WriteApproval`` wraps it with
what every door must do the same way, so the executor only validates, calls and shapes.

Invariants:
- The approver is asked with the exact arguments and, for a write that makes an order active,
  the safety gate's report made from the chart (``order_gate.gate_write``).
- Edited arguments are validated and their patient grounded again, and an edited order is
  checked again whatever field changed (drug, dose, frequency, duration, notes): when the new
  report finds what the approved one found, the approval stands on the new report; when it
  finds anything else (a 10x dose typed in the dialog), it is shown again, at most
  ``MAX_APPROVAL_ROUNDS`` times. No order is written on a report made for other values.
- After every approver, the one safety policy (``appliance.safety.policy.decide``) says whether
  the approval of that report is enough; a refusal by the policy is a rejection.
- A rejection, the approver's or the policy's, is an error result (nothing written) and is
  recorded on the record's audit log (``write_audit.record_rejection``). An approval carries
  its record (approval or override, who decided, the report) for the write's own audit row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from appliance.agent.grounding import validate_args
from appliance.agent.order_gate import gate_write
from appliance.agent.state import ToolResult
from appliance.agent.tool_results import error_result, with_safety
from appliance.agent.write_audit import approval_record, record_rejection
from appliance.safety.policy import Override, OverridePolicy, decide
from appliance.tools.base import Approver, ToolBox

MAX_APPROVAL_ROUNDS = 3
# What a refusal by the safety policy tells the clinician to do (each door asks for the same).
HOW_TO_OVERRIDE = "approve it again as an override, with a reason of real words and your password"
# The safety gate: validated order arguments -> appliance.safety.SafetyReport.
SafetyGate = Callable[[dict], Any]


@dataclass(frozen=True)
class Approved:
    """A write the clinician approved and the policy allowed: the arguments to send, the
    safety report they were approved against (None for no order), and the approval record."""

    args: dict
    report: Any
    record: dict


@dataclass(frozen=True)
class WriteApproval:
    """The approval hook: ``hook(tool, clean, patient_ids)`` gives ``Approved`` or the
    rejection's error result. ``patient_ids`` (None: no grounding) are those an edited
    patient may be."""

    approver: Approver
    tools: ToolBox
    deadline: float
    safety_gate: SafetyGate | None = None

    def __call__(self, tool: str, clean: dict, patient_ids: frozenset[str] | None = None) -> Approved | ToolResult:
        report = gate_write(tool, clean, self.safety_gate)
        for _ in range(MAX_APPROVAL_ROUNDS):
            approval = self.approver(tool, dict(clean), safety=report)
            if not approval.approved:
                record_rejection(self.tools, tool, clean.get("patient_id"), approval, report, self.deadline)
                return with_safety(error_result(tool, clean, "rejected_by_user", approval.reason), report)
            edited, error_type, fields = validate_args(tool, approval.args)
            if not error_type and patient_ids is not None and edited["patient_id"] not in patient_ids:
                error_type, fields = "missing_required_args", ["patient_id"]
            if error_type:
                result = error_result(tool, approval.args, error_type, "edited arguments failed validation", fields)
                return with_safety(result, report)
            if edited == clean:
                break  # approved as checked
            clean, shown, report = edited, report, gate_write(tool, edited, self.safety_gate)
            if same_findings(report, shown):
                break  # the edit changes nothing the check finds: approved as checked again
        else:
            return with_safety(error_result(tool, clean, "rejected_by_user", "the order kept changing in approval"),
                               report)
        decision = None if report is None else decide(
            report, True, Override(approval.override_reason, approval.reauthenticated), OverridePolicy.from_settings(),
            how_to_override=HOW_TO_OVERRIDE)
        if decision is not None and not decision.allowed:  # the one policy, whatever the door let through
            refused = replace(approval, approved=False, reason=decision.message)
            record_rejection(self.tools, tool, clean.get("patient_id"), refused, report, self.deadline)
            return with_safety(error_result(tool, clean, "rejected_by_user", decision.message), report)
        return Approved(clean, report, approval_record(approval, decision))


def same_findings(new: Any, old: Any) -> bool:
    """Whether two safety reports find the same: the same findings, in the same words, and the
    same checks left unrun (a finding's words carry the dose it was made for)."""
    if new is None or old is None:
        return new is old
    return ([(f.kind, f.severity, f.text) for f in new.findings] == [(f.kind, f.severity, f.text) for f in old.findings]
            and new.unchecked == old.unchecked)
