"""The medication safety gate and the sig for every write that makes an order active: a new
prescription, a change of dose or frequency, a resume or a renewal (TOOL_EXECUTE).

Invariants:
- A change is checked as the prescription it makes: the order's drug with the new dose and
  frequency (the order's own where the change keeps them), against the chart without the order
  being changed (it is no duplicate of its own change). A resume or renewal is checked with the
  order's values. Stop and hold check nothing (None: no report), and are still approved.
- A switch (``new_medication_name``) is checked as the new drug with its own dose and
  frequency, against the chart without the order it stops. A change that gives no new dose or
  frequency ("increase metformin by 500 mg": code never computes a dose) is the question "to
  what dose?" with the order as charted, before anyone is asked to approve; so is a switch
  without the new drug's dose and frequency.
- The order changed is found on the chart as the record finds it (``ehr_db.order_changes``:
  the drug's words in the order's name, active before held); none found leaves the args as
  given and the chart whole, so the report is never cleaner than the chart.
- The sig sent with a write (``contracts.SIG``) is read by code from the approved arguments
  (dosage, frequency and notes, as the clinician left them), never from the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from appliance.medication.orders import parse_order
from appliance.medication.sig import sig_record
from appliance.safety.chart_gate import ChartSafetyGate
from mcp_servers.contracts import CHANGE, PRESCRIBE, SIG, SIG_TOOLS, STATUS, ToolSet

ORDER_TOOLS = frozenset({PRESCRIBE, CHANGE, STATUS})
# The writes the safety gate checks before the clinician approves: their records' approval rule.
SAFETY_CHECKED = ToolSet(lambda tool: tool.approval == "clinician_after_safety")
ACTIVATING = frozenset({"resume", "renew"})
_STATUSES = {CHANGE: ("active", "on-hold"), "renew": ("active", "on-hold", "completed"), "resume": ("on-hold",)}


def _words(text: str) -> set[str]:
    return set("".join(c if c.isalnum() else " " for c in str(text or "").casefold()).split())


def chart_orders(chart: dict, medication_name: str, statuses: tuple[str, ...]) -> list[dict]:
    """The chart's orders of ``medication_name`` in the first of ``statuses`` that has any."""
    wanted = _words(medication_name)
    rows = [m for m in (chart.get("medications") or []) + (chart.get("past_medications") or [])
            if isinstance(m, dict)]
    for status in statuses:
        found = [r for r in rows if r.get("status") == status and wanted and wanted <= _words(r.get("medication_name"))]
        if found:
            return found
    return []


def chart_order(chart: dict, medication_name: str, statuses: tuple[str, ...]) -> dict | None:
    """The chart's (first) order of ``medication_name`` in the first of ``statuses`` that has one."""
    found = chart_orders(chart, medication_name, statuses)
    return found[0] if found else None


_WORDS = {"active": "active", "on-hold": "held", "completed": "completed"}


def order_problem(tool: str, clean: dict, tools, deadline: float) -> tuple[str, str] | None:
    """(error type, text) when the chart shows the change cannot apply (no such order, or two
    alike: the clinician is asked which), before anyone is asked to approve it; None when it
    can, or when the chart could not be read (the record decides)."""
    if tool not in (CHANGE, STATUS):
        return None
    outcome = tools.call("get_patient_chart", {"patient_id": clean.get("patient_id")}, deadline)
    if not outcome.ok or not isinstance(outcome.result, dict):
        return None
    action = "change" if tool == CHANGE else clean.get("action")
    statuses = _STATUSES.get(action) or {"stop": ("active", "on-hold"), "hold": ("active",)}.get(action, ("active",))
    found = chart_orders(outcome.result, clean.get("medication_name") or "", statuses)
    name = clean.get("medication_name")
    if not found:
        wanted = " or ".join(_WORDS.get(s, s) for s in statuses)
        return "not_found", f"No {wanted} order of {name} is on the patient's chart; nothing was changed."
    if len(found) > 1 and statuses[0] != "completed":
        listed = "; ".join(" ".join(str(r.get(k)) for k in ("medication_name", "dosage", "frequency") if r.get(k))
                           for r in found)
        return "ambiguous_drug_name", f"{len(found)} orders of {name} are on the chart ({listed}): which one?"
    if tool == CHANGE:
        return _dose_question(clean, found[0])
    return None


def _dose_question(clean: dict, row: dict) -> tuple[str, str] | None:
    """The question a change without the values it needs asks (see the module docstring)."""
    name, new = clean.get("medication_name"), clean.get("new_medication_name")
    if new and not (clean.get("dosage") and clean.get("frequency")):
        return "invalid_args", (f"To switch {name} to {new}, say {new}'s dose and how often (for example "
                                f"'switch {name} to {new} <dose> <how often>').")
    if new or clean.get("dosage") or clean.get("frequency"):
        return None
    charted = " ".join(str(row.get(k)) for k in ("medication_name", "dosage", "frequency") if row.get(k))
    return "invalid_args", (f"To what dose? The chart has {charted}; say the new dose and how often (for example "
                            f"'change {name} to <dose> <how often>').")


def replacing(tool: str, args: dict) -> Callable[[dict, dict], tuple[dict, dict]]:
    """(chart, args) -> (the chart without the order changed, the prescription it makes)."""
    statuses = _STATUSES[CHANGE if tool == CHANGE else args.get("action")]

    def apply(chart: dict, given: dict) -> tuple[dict, dict]:
        row = chart_order(chart, given.get("medication_name") or "", statuses)
        switch_to = given.get("new_medication_name")
        if row is None:
            return chart, ({**given, "medication_name": switch_to} if switch_to else given)
        kept = [m for m in chart.get("medications") or [] if m is not row]
        made = {"patient_id": given.get("patient_id"), "medication_name": row.get("medication_name"),
                "dosage": given.get("dosage") or row.get("dosage"),
                "frequency": given.get("frequency") or row.get("frequency")}
        if switch_to:  # the new drug with its own values, never the old order's dose
            made = {"patient_id": given.get("patient_id"), "medication_name": switch_to,
                    "dosage": given.get("dosage"), "frequency": given.get("frequency")}
        return {**chart, "medications": kept}, made
    return apply


def gate_write(tool: str, clean: dict, safety_gate) -> Any:
    """The safety report of a write (see the module docstring), or None when none is made."""
    if safety_gate is None or tool not in SAFETY_CHECKED:
        return None
    if tool == PRESCRIBE:
        return safety_gate(clean)
    if tool == STATUS and clean.get("action") not in ACTIVATING:
        return None
    if isinstance(safety_gate, ChartSafetyGate):
        return safety_gate(clean, replacing=replacing(tool, clean))
    switch_to = clean.get("new_medication_name") if tool == CHANGE else None
    # a gate that reads no chart: checked with the values given (a switch: as the new drug)
    return safety_gate({**clean, "medication_name": switch_to} if switch_to else clean)


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


__all__ = ["ORDER_TOOLS", "chart_order", "chart_orders", "order_problem", "gate_write", "implied_dosage_said", "replacing", "with_sig"]
