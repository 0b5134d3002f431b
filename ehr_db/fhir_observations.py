"""FHIR R4 Observation -> EHR ``observations`` rows: labs and vital signs, with values and
reference ranges in the record's unit.

Invariants (besides ``fhir_mapping``'s: pure, ``Skip`` with a reason, codes only from their own
system):
- Only the categories in ``SUPPORTED_CATEGORIES`` are imported; an observation needs a subject
  and an effective time, and at least one part with a value and a name.
- An Observation may yield several rows (a blood-pressure panel yields one per component);
  component rows get the id ``<observation id>-<component LOINC code>``.
- A value given in another unit with a standard conversion for its LOINC code (HbA1c in
  mmol/mol, creatinine in umol/L, weight in lb; ``units``) is converted, with its reference
  range, before anything checks or stores it; a bound without a unit of its own is in the
  value's unit.
- The flag is the resource's own interpretation code, else computed from the range.
"""

from __future__ import annotations

from typing import Any

from ehr_db import units
from ehr_db.codes import LOINC_SYSTEM, interpretation, interpretation_from_code
from ehr_db.fhir_mapping import (
    Resolver,
    Skip,
    concept_text,
    encounter_ref,
    find_coding,
    first_of,
    subject_patient,
)

SUPPORTED_CATEGORIES = ("laboratory", "vital-signs")


def _value(holder: dict) -> tuple[float | None, str | None, str | None]:
    """(numeric value, text value, unit) of an Observation or component."""
    q = holder.get("valueQuantity")
    if q and isinstance(q.get("value"), (int, float)):
        return float(q["value"]), None, q.get("unit") or q.get("code")
    if isinstance(holder.get("valueInteger"), int):
        return float(holder["valueInteger"]), None, None
    if isinstance(holder.get("valueString"), str):
        return None, holder["valueString"], None
    if isinstance(holder.get("valueBoolean"), bool):
        return None, "true" if holder["valueBoolean"] else "false", None
    if holder.get("valueCodeableConcept"):
        return None, concept_text(holder["valueCodeableConcept"]), None
    return None, None, None


def _in_record_unit(loinc: str | None, num: float | None, unit: str | None, code: str | None,
                    low: dict, high: dict) -> tuple[float | None, str | None, Any, Any]:
    """The value, its unit and the reference range's bounds in the record's unit (``units``); a
    bound without a unit of its own is in the value's unit."""
    found = units.conversion(loinc, unit, code) if num is not None else None
    if found is None:
        return num, unit, low.get("value"), high.get("value")

    def bound(q: dict) -> Any:
        value = q.get("value")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return value
        own = units.conversion(loinc, q.get("unit"), q.get("code"))
        if q.get("unit") or q.get("code"):
            return own.convert(value) if own is not None else value
        return found.convert(value)

    return found.convert(num), found.stored, bound(low), bound(high)


def observation_rows(r: dict, resolve: Resolver) -> list[dict]:
    categories = {c.get("code") for cat in r.get("category") or [] for c in cat.get("coding") or []}
    category = next((c for c in SUPPORTED_CATEGORIES if c in categories), None)
    if category is None:
        raise Skip("unsupported observation category")
    pid = subject_patient(r, resolve)
    when = r.get("effectiveDateTime") or (r.get("effectivePeriod") or {}).get("start") or r.get("issued")
    if not when:
        raise Skip("missing effective time")
    base = {
        "patient_id": pid,
        "encounter_id": encounter_ref(r, resolve),
        "category": category,
        "status": r.get("status"),
        "effective_at": when,
        "source": "fhir",
    }
    parts = [(r["id"], r)] if not r.get("component") else [
        (f"{r['id']}-{(find_coding(c.get('code'), LOINC_SYSTEM) or {}).get('code') or n}", c)
        for n, c in enumerate(r["component"], 1)
    ]
    rows = []
    for row_id, holder in parts:
        num, text, unit = _value(holder)
        display = concept_text(holder.get("code"))
        if (num is None and text is None) or not display:
            continue
        loinc = (find_coding(holder.get("code"), LOINC_SYSTEM) or {}).get("code")
        ref = first_of(holder.get("referenceRange") or r.get("referenceRange")) or {}
        low, high = ref.get("low") or {}, ref.get("high") or {}
        quantity = holder.get("valueQuantity") or {}
        num, unit, low, high = _in_record_unit(loinc, num, unit, quantity.get("code"), low, high)
        flag = interpretation_from_code((find_coding(first_of(holder.get("interpretation"))) or {}).get("code"))
        rows.append({
            "id": row_id,
            **base,
            "loinc_code": loinc,
            "display": display,
            "value_num": num,
            "value_text": text,
            "unit": unit,
            "ref_low": low,
            "ref_high": high,
            "interpretation": flag or interpretation(num, low, high),
        })
    if not rows:
        raise Skip("no usable value")
    return rows
