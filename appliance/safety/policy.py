"""The one safety policy every door applies to a prescription: the terminal's approval dialog,
the line session's prompt, a headless ``ask --approve-writes`` and the clinic host's record
server all decide with ``decide`` and nothing else.

The rule:
- A write with no safety report (not a prescription), or a report that does not need an
  override (``SafetyReport.needs_override``: no high finding and nothing unchecked), is written
  when the clinician (or the operator, headless) approved it.
- A report that needs an override (a high finding; an unknown drug; a dose the table could not
  read; a weight-based dose without a charted weight; a check that could not run) is written
  only as an override: approved, with a reason of real words (at least ``min_reason_words``
  words of two or more letters; the operator sets the minimum, ``APPLIANCE_OVERRIDE_MIN_WORDS``)
  and the clinician's password given again for this write (``reauthenticated``). Where the
  appliance has no clinician accounts at all there is no password to give: ``reauthenticated``
  is None and the audit says so; a host with terminal tokens always has accounts.
- Anything else is refused, and the refusal says what was missing.

Invariants: pure (no I/O, no logging: reports carry patient data); the decision's ``audit`` is
the report's audit entry with the override's reason and whether the password was given again,
so every door keeps the same record of the same decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from appliance.safety.report import SafetyReport, override_reason

DEFAULT_MIN_REASON_WORDS = 3
WORD = re.compile(r"[^\W\d_]{2,}")  # a word: two or more letters
PASSWORD_NEEDED = "the clinician's password given again"


@dataclass(frozen=True)
class OverridePolicy:
    """What an override needs; one per appliance, from its settings."""

    min_reason_words: int = DEFAULT_MIN_REASON_WORDS

    @classmethod
    def from_settings(cls, settings: Any = None) -> OverridePolicy:
        if settings is None:
            from appliance.config import Settings

            settings = Settings()
        return cls(max(1, int(getattr(settings, "override_min_words", DEFAULT_MIN_REASON_WORDS))))

    def reason_problem(self, text: str | None) -> str | None:
        """Why ``text`` is not a usable override reason, or None when it is."""
        reason = override_reason(text)
        if reason is None:
            return f"an override needs a reason (at least {self.min_reason_words} words)"
        words = [w.lower() for w in WORD.findall(reason)]
        distinct = len(set(words))
        if len(words) < self.min_reason_words or distinct < min(2, self.min_reason_words):
            return (f"the override reason must be at least {self.min_reason_words} real words "
                    f"saying why (got {reason!r})")
        return None


@dataclass(frozen=True)
class Override:
    """What the clinician gave with an approval that may be an override."""

    reason: str | None = None
    # True: the password was given again and is right; False: missing or wrong; None: this
    # appliance has no clinician accounts, so there is no password to give.
    reauthenticated: bool | None = False


@dataclass(frozen=True)
class PolicyDecision:
    allowed: bool
    kind: Literal["approval", "override", "refused", "rejected"]
    message: str  # for the clinician or operator: why refused, or what was overridden ("" for a plain approval)
    audit: dict[str, Any] | None = field(default=None)  # the report's audit entry (None: no report)

    @property
    def override_reason(self) -> str | None:
        return (self.audit or {}).get("override_reason") if self.kind == "override" else None


def _what_needs_override(report: SafetyReport) -> str:
    high = [f.text.rstrip(". ") for f in report.by_severity("high")]
    unchecked = [t.rstrip(". ") for t in report.unchecked if t.rstrip(". ") not in high]
    parts = [f"unresolved high-severity safety finding(s): {'; '.join(high)}"] if high else []
    if unchecked:
        parts.append(f"it could not be fully checked: {'; '.join(unchecked)}")
    return ". ".join(parts)


def _audit(report: SafetyReport, reason: str | None, reauthenticated: bool | None) -> dict[str, Any]:
    return {**report.to_audit(reason), "reauthenticated": reauthenticated if reason else None}


def decide(report: SafetyReport | None, approved: bool, override: Override | None = None,
           policy: OverridePolicy | None = None, *, how_to_override: str = "approve it as an override") -> PolicyDecision:
    """The decision on one write (see the module docstring). ``how_to_override`` names the
    door's way to give a reason and the password, for the refusal's last sentence."""
    policy = policy or OverridePolicy()
    override = override or Override()
    if not approved:
        audit = None if report is None else _audit(report, None, None)
        return PolicyDecision(False, "rejected", "", audit)
    if report is None:
        return PolicyDecision(True, "approval", "", None)
    if not report.needs_override:
        return PolicyDecision(True, "approval", "", _audit(report, None, None))
    what = _what_needs_override(report)
    missing = []
    problem = policy.reason_problem(override.reason)
    if problem:
        missing.append(problem)
    if override.reauthenticated is False:
        missing.append(f"an override needs {PASSWORD_NEEDED}")
    if missing:
        return PolicyDecision(False, "refused",
                              f"Prescription of '{report.drug}' refused: {what}. Not overridden: "
                              f"{'; '.join(missing)}. To write it, {how_to_override} (the reason is audited).",
                              _audit(report, None, None))
    reason = override_reason(override.reason)
    return PolicyDecision(True, "override",
                          f"Safety finding(s) overridden for '{report.drug}': {what}. Reason recorded: {reason}",
                          _audit(report, reason, override.reauthenticated))


__all__ = ["DEFAULT_MIN_REASON_WORDS", "Override", "OverridePolicy", "PolicyDecision", "decide"]
