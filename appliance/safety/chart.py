"""Reading what the safety gate needs out of a chart (``get_patient_chart``'s result).

Invariants:
- Pure functions over the chart dict; a missing or malformed section reads as "not on the
  chart" (None or empty), never as an exception.
- A medication's ingredients come from the gate's one name resolution
  (``ingredients.ingredients_of``: curated tables, brands, combinations, salts) plus its RxNorm
  code, so a charted brand ("Janumet") counts like its generics.
- Codes are matched only where certain (SNOMED CT from ``ehr_db.codes``; eGFR LOINC codes
  listed below); displays are matched too, so imported records with other codes still count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from appliance.safety.classes import RXNORM_TO_INGREDIENT, fold
from appliance.safety.ingredients import ingredients_of

# The orders the gate counts: active ones only (issue 37). A held order is not being taken, and
# resuming it is a write of its own that the gate checks against the orders active then; a draft
# is not yet an order; stopped and completed orders are listed apart and never count.
ACTIVE_MEDICATION_STATUSES = ("active",)
PREGNANCY_SNOMED = frozenset({"77386006"})  # Pregnancy
# SNOMED CT CKD concepts in the EHR's catalogue, with the lowest eGFR of their stage band
# (None: stage not given).
CKD_SNOMED: dict[str, int | None] = {"709044004": None, "433144002": 30, "431857002": 15}
# eGFR LOINC codes: MDRD (33914-3, 48642-3, 48643-1), CKD-EPI (62238-1, 88293-6, 88294-4),
# CKD-EPI 2021 race-free (98979-8).
EGFR_LOINC = frozenset({"33914-3", "48642-3", "48643-1", "62238-1", "88293-6", "88294-4", "98979-8"})
# Body weight LOINC codes (measured, stated, with clothes); the unit converts to kg.
WEIGHT_LOINC = frozenset({"29463-7", "3141-9", "3142-7", "8350-1", "8351-9"})
WEIGHT_UNIT_KG = {"kg": 1.0, "g": 0.001, "lb": 0.45359237, "lbs": 0.45359237, "[lb_av]": 0.45359237}
SEVERE_REACTION = re.compile(
    r"anaphyla|angioedema|angio-oedema|bronchospasm|stevens|johnson|\bsjs\b|toxic epidermal|\bdress\b|"
    r"throat swelling|airway|hypotension|wheez", re.IGNORECASE)


@dataclass(frozen=True)
class ChartMedication:
    row: dict[str, Any]  # the chart's row, kept as evidence
    name: str
    ingredients: frozenset[str]

    @property
    def evidence(self) -> dict[str, Any]:
        return {k: self.row.get(k) for k in ("medication_name", "rxnorm_code", "dosage", "frequency", "status")}


@dataclass(frozen=True)
class RenalStatus:
    egfr: float | None  # latest eGFR value on the chart
    egfr_row: dict | None
    ckd_row: dict | None  # the CKD problem, when listed
    ckd_floor: int | None  # lowest eGFR of the listed CKD stage (None: not given)

    @property
    def effective_egfr(self) -> float | None:
        """The measured eGFR when there is one, else the floor of the listed CKD stage."""
        if self.egfr is not None:
            return self.egfr
        return self.ckd_floor if self.ckd_row is not None else None

    @property
    def impaired(self) -> bool:
        value = self.effective_egfr
        return (value is not None and value < 60) or (self.ckd_row is not None and self.egfr is None)

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.egfr_row:
            out["lab"] = {k: self.egfr_row.get(k) for k in ("display", "loinc_code", "value", "unit", "effective_at")}
        if self.ckd_row:
            out["problem"] = {k: self.ckd_row.get(k) for k in ("display", "snomed_code")}
        return out

    def describe(self) -> str:
        parts = []
        if self.egfr is not None:
            parts.append(f"eGFR {self.egfr:g}")
        if self.ckd_row:
            parts.append(str(self.ckd_row.get("display") or "chronic kidney disease"))
        return ", ".join(parts) or "renal function not on the chart"


def _rows(chart: dict, key: str) -> list[dict]:
    value = chart.get(key) if isinstance(chart, dict) else None
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def patient_age(chart: dict) -> int | None:
    patient = chart.get("patient") if isinstance(chart, dict) else None
    age = patient.get("age") if isinstance(patient, dict) else None
    return age if isinstance(age, int) and not isinstance(age, bool) else None


def active_medications(chart: dict) -> list[ChartMedication]:
    meds = []
    for row in _rows(chart, "medications"):
        if (row.get("status") or "active") not in ACTIVE_MEDICATION_STATUSES:
            continue
        name = str(row.get("medication_name") or "").strip()
        ingredients = set(ingredients_of(name))
        code = row.get("rxnorm_code")
        if code and str(code) in RXNORM_TO_INGREDIENT:
            ingredients.add(RXNORM_TO_INGREDIENT[str(code)])
        if name:
            meds.append(ChartMedication(row, name, frozenset(ingredients)))
    return meds


def allergies(chart: dict) -> list[dict]:
    return _rows(chart, "allergies")


def allergy_is_severe(row: dict) -> bool:
    return (row.get("severity") or "").lower() == "severe" or bool(SEVERE_REACTION.search(row.get("reaction") or ""))


def allergy_evidence(row: dict) -> dict[str, Any]:
    return {k: row.get(k) for k in ("substance", "substance_code", "reaction", "severity")}


def pregnancy_problem(chart: dict) -> dict | None:
    for row in _rows(chart, "active_problems"):
        display = fold(row.get("display"))
        if str(row.get("snomed_code") or "") in PREGNANCY_SNOMED or (
            re.search(r"\bpregnan", display) and not re.search(r"\bnot pregnant\b", display)
        ):
            return row
    return None


def _ckd_floor(row: dict) -> tuple[bool, int | None]:
    code = str(row.get("snomed_code") or "")
    display = fold(row.get("display"))
    if code in CKD_SNOMED:
        listed = CKD_SNOMED[code]
    elif re.search(r"chronic (kidney|renal) disease|\bckd\b|end stage (renal|kidney)|\besrd\b|\beskd\b", display):
        listed = None
    else:
        return False, None
    if re.search(r"end stage|\besrd\b|\beskd\b|stage 5", display):
        return True, 0
    stage = re.search(r"stage (\d)\s*([ab])?\b", display)
    if stage:
        floors = {"1": 90, "2": 60, "3": 30, "4": 15}
        floor = floors.get(stage.group(1))
        if stage.group(1) == "3" and stage.group(2) == "a":
            floor = 45
        return True, floor if floor is not None else listed
    return True, listed


def _number(value: Any) -> float | None:
    """A lab value as a number: 42 -> 42, ">60" -> 60, "<15" -> 14.9 (below the bound)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    found = re.fullmatch(r"\s*([<>]=?)?\s*(\d+(?:\.\d+)?)\s*", str(value or ""))
    if not found:
        return None
    number = float(found.group(2))
    return number - 0.1 if found.group(1) == "<" else number


@dataclass(frozen=True)
class Weight:
    kg: float
    row: dict[str, Any]  # the chart's vital-signs row, kept as evidence

    @property
    def evidence(self) -> dict[str, Any]:
        return {k: self.row.get(k) for k in ("display", "loinc_code", "value", "unit", "effective_at")}


def body_weight(chart: dict) -> Weight | None:
    """The latest body weight on the chart (vitals, else labs) in kg, or None when none is
    charted or its unit is not a mass code can convert (a weight is never guessed)."""
    rows = [r for r in _rows(chart, "vitals") + _rows(chart, "labs")
            if str(r.get("loinc_code") or "") in WEIGHT_LOINC
            or re.fullmatch(r"(body )?weight", fold(r.get("display")))]
    for row in sorted(rows, key=lambda r: str(r.get("effective_at") or ""), reverse=True):
        value = _number(row.get("value"))
        factor = WEIGHT_UNIT_KG.get(str(row.get("unit") or "kg").strip().lower())
        if value is not None and factor is not None and 0 < value * factor < 700:
            return Weight(value * factor, row)
    return None


def renal_status(chart: dict) -> RenalStatus:
    egfr_rows = [
        r for r in _rows(chart, "labs")
        if str(r.get("loinc_code") or "") in EGFR_LOINC or re.search(r"\begfr\b|glomerular filtration", fold(r.get("display")))
    ]
    egfr_rows = [r for r in egfr_rows if _number(r.get("value")) is not None]
    latest = max(egfr_rows, key=lambda r: str(r.get("effective_at") or ""), default=None)
    ckd_row, ckd_floor = None, None
    for row in _rows(chart, "active_problems"):
        is_ckd, floor = _ckd_floor(row)
        if is_ckd and (ckd_row is None or (floor is not None and (ckd_floor is None or floor < ckd_floor))):
            ckd_row, ckd_floor = row, floor
    return RenalStatus(_number(latest.get("value")) if latest else None, latest, ckd_row, ckd_floor)


__all__ = [
    "ACTIVE_MEDICATION_STATUSES", "CKD_SNOMED", "EGFR_LOINC", "PREGNANCY_SNOMED", "WEIGHT_LOINC", "ChartMedication",
    "RenalStatus", "Weight", "active_medications", "allergies", "allergy_evidence", "allergy_is_severe", "body_weight",
    "patient_age", "pregnancy_problem",
    "renal_status",
]
