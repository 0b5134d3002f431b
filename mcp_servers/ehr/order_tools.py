"""The EHR server's order changes (``change_medication_order``, ``update_medication_status``)
apart from their MCP declarations in ``server``: finding the order, what the host's safety gate
checks, and the clinician-safe texts of their failures.

Invariants:
- The order a change applies to is found by the record (``ehr_db.order_changes``) before any
  check or approval is used; the write then names that order by id, so what was checked is what
  is changed.
- A change that makes an order active (a new dose or frequency, resume, renew) is checked by the
  host's gate as a prescription of the order's drug with its new values (a switch: of the new
  drug with its own dose and frequency); the chart it is
  checked against leaves out the order being changed (``chart_without``). Stop and hold check
  nothing (they take a drug away), but need an approval like every write.
- Failure texts carry no patient data beyond what the caller sent (the drug it named).
"""

from __future__ import annotations

from typing import Any

from ehr_db import order_changes
from ehr_db.errors import AmbiguousOrder, OrderNotFound

ACTIVATING = frozenset({"change", "resume", "renew"})
_STATUS_WORDS = {"active": "active", "on-hold": "held", "completed": "completed"}


def order_for(repo, patient_id: str, medication_name: str, action: str) -> dict[str, Any]:
    return order_changes.order_for(repo, patient_id, medication_name, action)


def as_prescription(old: dict[str, Any], patient_id: str, dosage: str | None, frequency: str | None,
                    new_medication_name: str | None = None) -> dict[str, str]:
    """The prescription the host's gate checks: the order's drug with its new values; for a
    switch the new drug with its own values (never the old order's dose)."""
    if new_medication_name:
        return {"patient_id": patient_id.strip(), "medication_name": new_medication_name.strip(),
                "dosage": (dosage or "").strip(), "frequency": (frequency or "").strip()}
    return {"patient_id": patient_id.strip(), "medication_name": old["medication_name"],
            "dosage": (dosage or old.get("dosage") or "").strip(),
            "frequency": (frequency or old.get("frequency") or "").strip()}


def chart_without(chart: dict[str, Any], order_id: str | None) -> dict[str, Any]:
    """``chart`` with the order ``order_id`` left out of its medications."""
    if not order_id or not isinstance(chart.get("medications"), list):
        return chart
    return {**chart, "medications": [m for m in chart["medications"] if m.get("id") != order_id]}


def change(repo, tool: str, patient_id: str, medication_name: str, action: str, author: str, *,
           dosage: str | None = None, frequency: str | None = None, reason: str | None = None,
           order_id: str | None = None, sig=None, idempotency_key: str | None = None,
           approval: dict | None = None, new_medication_name: str | None = None) -> dict[str, Any]:
    """Write the change (``order_changes.change_order``; a switch with ``new_medication_name``);
    the tool's answer."""
    written = order_changes.change_order(
        repo, tool, patient_id, medication_name, action, author=author, dosage=dosage, frequency=frequency,
        reason=reason, order_id=order_id, sig=sig.model_dump() if sig is not None else None,
        idempotency_key=idempotency_key, approval=approval, new_medication_name=new_medication_name)
    return {**written, "patient_id": patient_id.strip(), "action": action, "reason": reason, "author": author}


def not_found_text(exc: OrderNotFound) -> str:
    wanted = " or ".join(_STATUS_WORDS.get(s, s) for s in exc.statuses)
    return f"No {wanted} order of '{exc.medication_name.strip()}' is on the patient's chart."


def ambiguous_text(exc: AmbiguousOrder) -> str:
    return (f"{exc.count} orders of '{exc.medication_name.strip()}' are on the patient's chart: "
            "say which one (its dose) to change.")
