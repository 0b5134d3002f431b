"""The approver of a headless run (``appliance ask --approve-writes``): writes the operator
approved up front, decided by the one safety policy (``appliance.safety.policy.decide``) like
every other door. A prescription whose report needs an override (a high-severity finding, or
anything the gate could not check) is refused unless the operator gave an override reason of
real words (``--override-safety REASON``).

Invariants:
- No clinician sees a headless prescription before it is written, so the policy's decision is
  final here: refused means refused, with a message that says why and how to override.
- A headless write run signs its clinician in with their password before anything is built
  (``appliance.accounts.sign_in.headless_clinician``), for this run and its override: that is
  the password given again (``reauthenticated``).
- An approval carries ``override_reason`` only when the policy decided an override; the agent
  keeps it in the write's audit row (``appliance.agent.write_audit``), and a refusal is recorded
  as a rejection there too.
"""

from __future__ import annotations

from appliance.safety.policy import Override, OverridePolicy, PolicyDecision, decide
from appliance.safety.report import SafetyReport
from appliance.tools.base import Approval

OVERRIDE_HINT = "pass --override-safety REASON"


class HeadlessApprover:
    def __init__(self, override_reason: str | None = None, policy: OverridePolicy | None = None):
        self.override_reason = override_reason
        self.policy = policy or OverridePolicy.from_settings()
        self.decisions: list[PolicyDecision] = []  # one per prescription, for the audit and the CLI

    def __call__(self, tool: str, args: dict, safety: SafetyReport | None = None) -> Approval:
        if safety is None:
            return Approval(True, args)
        decision = decide(safety, True, Override(self.override_reason, True), self.policy,
                          how_to_override=OVERRIDE_HINT)
        self.decisions.append(decision)
        if not decision.allowed:
            return Approval(False, args, decision.message)
        return Approval(True, args, decision.message or None, override_reason=decision.override_reason,
                        reauthenticated=True)
