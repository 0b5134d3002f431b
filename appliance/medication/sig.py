"""An order's sig in the record's structured form: FHIR R4 MedicationRequest shapes
(``dosageInstruction``: timing, asNeeded, route, doseAndRate, maxDosePerPeriod;
``dispenseRequest``: quantity, refills, supply duration) from an ``orders.Order``.

Invariants:
- Built only from what the parser read (``orders.parse_order``); a part it did not read is left
  out, never filled with a default. ``text`` is the order as written.
- A frequency range ("q4-6h") is a period with a maximum period (``period`` 4, ``periodMax``
  6); a count per day is ``frequency`` per 1 day; less than daily is one per ``period`` days or
  weeks; times of day ("qHS", "qAM") add FHIR ``when`` codes.
- ``sig_record`` is what the record keeps (``contracts.SigRecord``): text fields exactly as
  written, within the contract's bounds (a longer one is left out, not cut).
"""

from __future__ import annotations

import re
from typing import Any

from appliance.medication.orders import Amount, Order

UCUM = "http://unitsofmeasure.org"
_UCUM_UNITS = {"mg": "mg", "g": "g", "mcg": "ug", "ng": "ng", "mL": "mL", "L": "L", "unit": "[U]", "mEq": "meq",
               "mmol": "mmol"}
_WHEN = ((r"q\.?h\.?s\.?|\bh\.?s\.?\b|bedtime|before bed|at night|nightly", "HS"),
         (r"q\.?a\.?m\.?|morning|\bo\.?m\.?\b", "MORN"), (r"q\.?p\.?m\.?|evening", "EVE"),
         (r"with (?:each )?meals?|with (?:breakfast|lunch|dinner|supper)", "C"),
         (r"before (?:each )?meals?|before (?:breakfast|lunch|dinner|supper)", "AC"),
         (r"after (?:each )?meals?|after (?:breakfast|lunch|dinner|supper)", "PC"))
_HOURS = re.compile(r"(?:q\.?\s*|every\s+)(?P<h>\d+(?:\.\d+)?)\s*(?:(?:-|–|to)\s*(?P<h2>\d+)\s*)?h", re.IGNORECASE)
_TEXT_BOUNDS = {"as_needed_for": 60, "max_per_period": 60, "duration": 40, "quantity": 40}


def _quantity(amount: Amount) -> dict[str, Any]:
    out: dict[str, Any] = {"value": amount.value}
    if amount.unit:
        out["unit"] = amount.unit
        if amount.unit in _UCUM_UNITS:
            out.update(system=UCUM, code=_UCUM_UNITS[amount.unit])
    return out


def _timing(order: Order) -> dict[str, Any] | None:
    if order.frequency_text is None and order.duration_days is None:
        return None
    repeat: dict[str, Any] = {}
    text = order.frequency_text or ""
    hours = _HOURS.search(text)
    if order.one_time:
        repeat["count"] = 1
    elif hours:
        repeat.update(frequency=1, period=float(hours.group("h")), periodUnit="h")
        if hours.group("h2"):
            repeat["periodMax"] = float(hours.group("h2"))
    elif order.per_day is not None and order.per_day >= 1:
        repeat.update(frequency=round(order.per_day), period=1, periodUnit="d") if order.per_day.is_integer() \
            else repeat.update(frequency=1, period=round(24 / order.per_day, 2), periodUnit="h")
    elif order.per_day:
        days = round(1 / order.per_day)
        repeat.update(frequency=1, period=days // 7 if days % 7 == 0 else days, periodUnit="wk" if days % 7 == 0 else "d")
    when = [code for pattern, code in _WHEN if re.search(pattern, text, re.IGNORECASE)]
    if when:
        repeat["when"] = when
    if order.duration_days is not None:
        repeat["boundsDuration"] = {"value": order.duration_days, "unit": "d", "system": UCUM, "code": "d"}
    timing: dict[str, Any] = {"repeat": repeat} if repeat else {}
    if text:
        timing["code"] = {"text": text}
    return timing or None


def dosage_instruction(order: Order) -> dict[str, Any]:
    """FHIR Dosage for the order (see the module docstring)."""
    out: dict[str, Any] = {"text": order.text.strip()}
    timing = _timing(order)
    if timing:
        out["timing"] = timing
    if order.as_needed and order.as_needed_for:
        out["asNeededCodeableConcept"] = {"text": order.as_needed_for}
    else:
        out["asNeededBoolean"] = order.as_needed
    if order.route:
        out["route"] = {"text": order.route}
    if order.dose is not None:
        if order.dose.low is not None:
            low = Amount(order.dose.text, order.dose.low, None, order.dose.unit)
            out["doseAndRate"] = [{"doseRange": {"low": _quantity(low), "high": _quantity(order.dose)}}]
        else:
            out["doseAndRate"] = [{"doseQuantity": _quantity(order.dose)}]
    if order.max_per_day is not None:
        most = order.max_per_day
        numerator = _quantity(most) if most.unit not in (None, "dose") else {"value": most.value, "unit": "dose"}
        out["maxDosePerPeriod"] = {"numerator": numerator,
                                   "denominator": {"value": 1, "unit": "d", "system": UCUM, "code": "d"}}
    return out


def dispense_request(order: Order) -> dict[str, Any] | None:
    """FHIR MedicationRequest.dispenseRequest, or None when no quantity, refills or duration."""
    out: dict[str, Any] = {}
    if order.quantity is not None:
        out["quantity"] = _quantity(order.quantity)
    if order.refills is not None:
        out["numberOfRepeatsAllowed"] = order.refills
    if order.duration_days is not None:
        out["expectedSupplyDuration"] = {"value": order.duration_days, "unit": "d", "system": UCUM, "code": "d"}
    return out or None


def _bounded(key: str, text: str | None) -> str | None:
    return text if text is not None and len(text) <= _TEXT_BOUNDS[key] else None


def sig_record(order: Order) -> dict[str, Any]:
    """What the record keeps of the sig (``contracts.SigRecord``)."""
    return {
        "as_needed": order.as_needed,
        "as_needed_for": _bounded("as_needed_for", order.as_needed_for),
        "max_per_period": _bounded("max_per_period", order.max_per_day.text if order.max_per_day else None),
        "duration": _bounded("duration", order.duration_text),
        "quantity": _bounded("quantity", order.quantity.text if order.quantity else None),
        "refills": order.refills if order.refills is None or 0 <= order.refills <= 99 else None,
        "dosage_instruction": dosage_instruction(order),
        "dispense_request": dispense_request(order),
    }


def sig_summary(order: Order) -> str | None:
    """The sig as code read it, in a few words for the approval dialog ("500 mg, 3 a day, as
    needed for pain, max 4 g/day, for 7 days, dispense #30, 0 refills"); None when code read
    no dose and no frequency."""
    parts = []
    if order.dose is not None:
        unit = order.dose.unit or ""
        parts.append(f"{order.dose.text} {unit} (unit implied)" if order.dose.implied else order.dose.text)
    if order.per_day:
        parts.append("once" if order.one_time else
                     f"{order.per_day:g} a day" if order.per_day >= 1 else f"once every {round(1 / order.per_day):g} days")
    if order.as_needed:
        parts.append(f"as needed for {order.as_needed_for}" if order.as_needed_for else "as needed")
    if order.max_per_day is not None:
        parts.append(order.max_per_day.text)
    if order.duration_days is not None:
        parts.append(f"for {order.duration_days:g} days")
    if order.quantity is not None:
        parts.append(f"dispense {order.quantity.text}")
    if order.refills is not None:
        parts.append(f"{order.refills} refills")
    return ", ".join(parts) if order.dose is not None or order.per_day else None


__all__ = ["dispense_request", "dosage_instruction", "sig_record", "sig_summary"]
