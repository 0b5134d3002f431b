"""What the medication safety gate found, and how it is shown, audited and enforced.

Invariants:
- Findings are sorted most severe first (high, moderate, low, info), then by kind and text, so
  the same chart and drug always give the same report.
- A report is never an empty "no conflicts" for a drug the gate could not check: an unknown or
  ambiguous drug, or an unavailable knowledge service, is itself a finding, and ``complete`` is
  False whenever a check did not run over everything it should have.
- ``blocking`` means at least one high-severity finding; ``unchecked`` names what was not
  checked (a drug or ingredient the local data does not know or cannot resolve, a knowledge
  service or chart section that did not answer: unknown-drug and not-checked findings above
  info). A report that is blocking or has anything unchecked (``needs_override``) is written
  only as an override, at every door (``appliance.safety.policy.decide``). Info-level notes (a charted medication the interaction data lacks, whose curated class
  rules still ran; a combination checked ingredient by ingredient) do not refuse.
- Nothing here logs; the findings carry patient data (allergies, medications, labs) only for the
  approval dialog, the answer and the write's audit row.
- An audit entry fitted to the record's bound (``fit_audit``) keeps every finding's kind,
  severity and text as long as it can, and says what it left out: evidence first, then the least
  severe findings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("high", "moderate", "low", "info")
KINDS = ("allergy", "cross_reactivity", "interaction", "duplicate", "dose", "pregnancy", "renal", "age",
         "unknown_drug", "not_checked")
# The checks a report records in ``checked``, in the order the formatted text names them.
CHECKS = ("drug_data", "allergies", "interactions", "duplicates", "pregnancy", "renal", "age", "dose")
AUDIT_VERSION = 1
MAX_OVERRIDE_REASON = 500
UNKNOWN_DRUG_TEXT = "not checked: unknown to the local drug data"
UNCHECKED_KINDS = ("unknown_drug", "not_checked")  # findings that say a check could not run


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    severity: str  # one of SEVERITIES
    text: str  # one line, for the clinician
    evidence: dict[str, Any] = field(default_factory=dict)  # the chart rows and data behind it
    source: str = ""  # which data or curated table the finding comes from

    def __post_init__(self):
        if self.kind not in KINDS or self.severity not in SEVERITIES:
            raise ValueError(f"bad finding {self.kind!r}/{self.severity!r}")

    def line(self) -> str:
        return f"{self.severity.upper()} {self.kind.replace('_', ' ')}: {self.text}"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "text": self.text,
                "evidence": self.evidence, "source": self.source}


def sort_findings(findings: list[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), KINDS.index(f.kind), f.text)))


@dataclass(frozen=True)
class SafetyReport:
    drug: str  # the name as prescribed
    resolved: tuple[str, ...]  # the local drug data's generic name(s) it was checked as (empty: none)
    ingredients: tuple[str, ...]  # ingredients recognised in the name (curated table, catalogue, data)
    findings: tuple[Finding, ...]  # most severe first
    checked: dict[str, bool]  # CHECKS -> ran over complete inputs
    # The chart the checks read, so the approval dialog shows the same chart without reading it
    # again; not part of the findings (never compared, printed or audited).
    chart: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def blocking(self) -> bool:
        """At least one high-severity finding: headless use needs an override with a reason."""
        return any(f.severity == "high" for f in self.findings)

    @property
    def unchecked(self) -> list[str]:
        """What was not checked, one line each (the unknown-drug and not-checked findings above
        info): a headless run needs an override for these, like for a blocking report."""
        return [f.text for f in self.findings if f.kind in UNCHECKED_KINDS and f.severity != "info"]

    @property
    def needs_override(self) -> bool:
        """Blocking, or something unchecked: not written headless without an override reason."""
        return self.blocking or bool(self.unchecked)

    @property
    def complete(self) -> bool:
        return all(self.checked.get(c, False) for c in CHECKS)

    def by_severity(self, severity: str) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == severity)

    def lines(self) -> list[str]:
        """One line per finding, most severe first: the approval dialog's ``findings``
        (an empty list means the checks ran and found nothing)."""
        return [f.line() for f in self.findings]

    def formatted(self) -> str:
        """The pre-formatted text for SYNTHESIZE and the line session's prompt."""
        head = f"Medication safety check for '{self.drug}' (done by code against the chart and the local drug data)"
        if not self.findings:
            ran = ", ".join(_CHECK_WORDS[c] for c in CHECKS if self.checked.get(c))
            return f"{head}: no findings. Checked: {ran}."
        count = {s: len(self.by_severity(s)) for s in SEVERITIES}
        tally = ", ".join(f"{n} {s}" for s, n in count.items() if n)
        body = "\n".join(f"- {f.line()}" for f in self.findings)
        return f"{head}: {tally}.\n{body}"

    def to_audit(self, override_reason: str | None = None) -> dict[str, Any]:
        """What the write's audit row keeps: the findings with their evidence, the checks that
        ran, and the override reason when a blocking report was overridden."""
        return {
            "version": AUDIT_VERSION,
            "drug": self.drug,
            "resolved": list(self.resolved),
            "ingredients": list(self.ingredients),
            "blocking": self.blocking,
            "unchecked": self.unchecked,
            "complete": self.complete,
            "checked": dict(self.checked),
            "findings": [f.as_dict() for f in self.findings],
            "override_reason": override_reason,
        }


def _json_chars(value: dict[str, Any]) -> int:
    return len(json.dumps(value, sort_keys=True))


def fit_audit(entry: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """``entry`` (a ``to_audit`` dict) in at most ``max_chars`` of JSON, for a record that bounds
    its audit rows: the findings' evidence goes first (``evidence_omitted``), then findings from
    the least severe up (``findings_omitted`` counts them). An entry that fits is returned as is."""
    if _json_chars(entry) <= max_chars:
        return entry
    findings = [{k: v for k, v in f.items() if k != "evidence"} for f in entry["findings"]]
    fitted = {**entry, "findings": findings, "evidence_omitted": True}
    while findings and _json_chars(fitted) > max_chars:
        findings.pop()  # most severe first: the last is the least severe
        fitted["findings_omitted"] = len(entry["findings"]) - len(findings)
    return fitted


_CHECK_WORDS = {
    "drug_data": "the local drug data", "allergies": "allergies", "interactions": "interactions",
    "duplicates": "duplicate therapy", "pregnancy": "pregnancy", "renal": "renal function", "age": "age",
    "dose": "dose and frequency",
}


def override_reason(text: str | None) -> str | None:
    """A reason stripped and cut to MAX_OVERRIDE_REASON characters, or None when blank (whether
    it is enough for an override is ``appliance.safety.policy``'s to say)."""
    reason = " ".join((text or "").split())
    return reason[:MAX_OVERRIDE_REASON] if reason else None


__all__ = [
    "AUDIT_VERSION", "CHECKS", "KINDS", "MAX_OVERRIDE_REASON", "SEVERITIES", "UNCHECKED_KINDS", "UNKNOWN_DRUG_TEXT",
    "Finding", "SafetyReport", "fit_audit", "override_reason", "sort_findings",
]
