"""The approver of a headless run (``appliance ask --approve-writes``): writes the operator
approved up front, except a prescription with an unresolved high-severity safety finding or
anything the gate could not check (a drug or ingredient unknown to the local drug data:
``SafetyReport.needs_override``), which is refused unless the operator gave an override reason
(kept in the write's audit).

Invariants:
- No clinician sees a headless prescription before it is written, so the gate's decision is
  final here: refused means refused, with a message that says why and how to override.
- An approval carries ``override_reason`` only when it overrode a report that needed it; the agent
  keeps it in the write's audit row (``appliance.agent.write_audit``), and a refusal is recorded
  as a rejection there too.
"""

from __future__ import annotations

from appliance.safety.report import SafetyReport, headless_decision
from appliance.tools.base import Approval

OVERRIDE_HINT = "pass --override-safety REASON"


class HeadlessApprover:
    def __init__(self, override_reason: str | None = None):
        self.override_reason = override_reason
        self.decisions: list = []  # GateDecision per prescription, for the audit and the CLI

    def __call__(self, tool: str, args: dict, safety: SafetyReport | None = None) -> Approval:
        if safety is None:
            return Approval(True, args)
        decision = headless_decision(safety, self.override_reason, how_to_override=OVERRIDE_HINT)
        self.decisions.append(decision)
        if not decision.allowed:
            return Approval(False, args, decision.message)
        overridden = decision.audit["override_reason"] if safety.needs_override else None
        return Approval(True, args, decision.message or None, override_reason=overridden)
