"""The medication safety gate and the sig for every write that makes an order active: a new
prescription, a change of dose or frequency, a resume or a renewal (TOOL_EXECUTE).

Invariants:
- A change is checked as the prescription it makes: the order's drug with the new dose and
  frequency (the order's own where the change keeps them), against the chart without the order
  being changed (it is no duplicate of its own change). A resume or renewal is checked with the
  order's values. Stop and hold check nothing (None: no report), and are still approved.
- The order changed is found on the chart as the record finds it (``ehr_db.order_changes``:
  the drug's words in the order's name, active before held); none found leaves the args as
  given and the chart whole, so the report is never cleaner than the chart.
- The sig sent with a write (``contracts.SIG``) is read by code from the approved arguments
  (dosage, frequency and notes, as the clinician left them), never from the model.
"""

from __future__ import annotations

from typing import Any, Callable

from appliance.medication.orders import parse_order
from appliance.medication.sig import sig_record
from appliance.safety.chart_gate import ChartSafetyGate
from mcp_servers.contracts import SIG, SIG_TOOLS

PRESCRIBE, CHANGE, STATUS = "prescribe_medication", "change_medication_order", "update_medication_status"
ORDER_TOOLS = frozenset({PRESCRIBE, CHANGE, STATUS})
ACTIVATING = frozenset({"resume", "renew"})
_STATUSES = {CHANGE: ("active", "on-hold"), "renew": ("active", "on-hold", "completed"), "resume": ("on-hold",)}


def _words(text: str) -> set[str]:
    return set("".join(c if c.isalnum() else " " for c in str(text or "").casefold()).split())


def chart_order(chart: dict, medication_name: str, statuses: tuple[str, ...]) -> dict | None:
    """The chart's order of ``medication_name`` in the first of ``statuses`` that has one."""
    wanted = _words(medication_name)
    rows = [m for m in (chart.get("medications") or []) + (chart.get("past_medications") or [])
            if isinstance(m, dict)]
    for status in statuses:
        for row in rows:
            if row.get("status") == status and wanted and wanted <= _words(row.get("medication_name")):
                return row
    return None


def replacing(tool: str, args: dict) -> Callable[[dict, dict], tuple[dict, dict]]:
    """(chart, args) -> (the chart without the order changed, the prescription it makes)."""
    statuses = _STATUSES[CHANGE if tool == CHANGE else args.get("action")]

    def apply(chart: dict, given: dict) -> tuple[dict, dict]:
        row = chart_order(chart, given.get("medication_name") or "", statuses)
        if row is None:
            return chart, given
        kept = [m for m in chart.get("medications") or [] if m is not row]
        made = {"patient_id": given.get("patient_id"), "medication_name": row.get("medication_name"),
                "dosage": given.get("dosage") or row.get("dosage"),
                "frequency": given.get("frequency") or row.get("frequency")}
        return {**chart, "medications": kept}, made
    return apply


def gate_write(tool: str, clean: dict, safety_gate) -> Any:
    """The safety report of a write (see the module docstring), or None when none is made."""
    if safety_gate is None or tool not in ORDER_TOOLS:
        return None
    if tool == PRESCRIBE:
        return safety_gate(clean)
    if tool == STATUS and clean.get("action") not in ACTIVATING:
        return None
    if isinstance(safety_gate, ChartSafetyGate):
        return safety_gate(clean, replacing=replacing(tool, clean))
    return safety_gate(clean)  # a gate that reads no chart: checked with the values given


def with_sig(tool: str, clean: dict) -> dict:
    """The write's arguments with its sig (``contracts.SIG``) when it makes an order active
    with a dose and frequency code can read."""
    if tool not in SIG_TOOLS or not clean.get("dosage") or not clean.get("frequency"):
        return clean
    text = " ".join(str(clean[k]) for k in ("dosage", "frequency", "notes") if clean.get(k))
    return {**clean, SIG: sig_record(parse_order(text, None))}


def implied_dosage_said(value: str, said: str) -> bool:
    """A dosage code sent with the drug's usual unit ("875 mg") for a number the clinician
    wrote bare ("augmentin 875 bid"): its number is a word of what they wrote."""
    parts = str(value or "").split()
    return len(parts) == 2 and parts[1] in ("mg", "mcg", "units") and parts[0] in _words(said)


__all__ = ["ORDER_TOOLS", "chart_order", "gate_write", "implied_dosage_said", "replacing", "with_sig"]
