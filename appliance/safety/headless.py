"""The approver of a headless run (``appliance ask --approve-writes``): writes the operator
approved up front, except a prescription with an unresolved high-severity safety finding,
which is refused unless the operator gave an override reason (kept in the write's audit).

Invariant: no clinician sees a headless prescription before it is written, so the gate's
decision is final here: refused means refused, with a message that says why and how to override.
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
        return Approval(True, args, decision.message or None)
