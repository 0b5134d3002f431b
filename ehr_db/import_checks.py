"""What an import may not change quietly, and the values it may not bring in.

Invariants:
- ``differences`` compares a row already in the record with the row an import would write in
  its place and returns each change to what clinicians rely on: a patient's identity (name,
  sex, birth date); an active allergy replaced (substance), moved to another patient, made
  inactive, its severity lowered or its reaction changed; an active or on-hold medication
  order changed in any of its drug, dose, frequency, status or patient. Anything else (a new
  row, a note, an observation, an allergy made more severe) is not a difference here.
- ``value_problem`` refuses a number that is not finite, or outside the physiological limits of
  its LOINC test (when the unit is the one the limits are in: the importer converts a value in
  another unit first, ``units``) or the generic bound; the reason names the field and the
  limits, never the value.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ehr_db.migrations import SEVERITIES

IDENTITY = ("given", "family", "sex", "birth_date")
ACTIVE_ORDERS = ("active", "on-hold")
ORDER_FIELDS = ("patient_id", "medication_name", "rxnorm_code", "dosage", "frequency", "status")
GENERIC_LIMIT = 1e6  # any number an import brings in: |value| at most this


@dataclass(frozen=True)
class Difference:
    """One change an import would make to what clinicians rely on."""

    table: str
    row_id: str
    patient_id: str | None
    field: str
    before: Any
    after: Any
    why: str

    def describe(self) -> str:
        who = f"patient {self.patient_id}" if self.patient_id else "a patient"
        where = "" if self.table == "patients" else f" {self.table} {self.row_id}:"
        return f"{who}:{where} {self.field} {_shown(self.before)} -> {_shown(self.after)} ({self.why})"

    def to_json(self) -> dict:
        return asdict(self)


def _shown(value: Any) -> str:
    return "(none)" if value is None else repr(value)


def _severity_rank(value: Any) -> int:
    return SEVERITIES.index(value) + 1 if value in SEVERITIES else 0


def differences(table: str, old: dict, new: dict) -> list[Difference]:
    """The changes of ``old`` -> ``new`` (same table and id) that need the operator's acceptance."""
    found: list[Difference] = []

    def add(field: str, why: str) -> None:
        found.append(Difference(table, str(old["id"]), old.get("patient_id") or (old["id"] if table == "patients"
                                                                                   else None),
                                field, old.get(field), new.get(field), why))

    if table == "patients":
        for field in IDENTITY:
            if field in new and new[field] != old.get(field):
                add(field, "the patient's identity")
    elif table == "allergy_intolerances" and old.get("clinical_status") == "active":
        if new.get("patient_id") != old.get("patient_id"):
            add("patient_id", "an allergy moved to another patient")
        for field in ("substance", "substance_code"):
            if new.get(field) != old.get(field):
                add(field, "an allergy replaced by another")
        if new.get("clinical_status") != "active":
            add("clinical_status", "an active allergy removed")
        if _severity_rank(new.get("severity")) < _severity_rank(old.get("severity")):
            add("severity", "an allergy downgraded")
        if old.get("reaction") is not None and new.get("reaction") != old.get("reaction"):
            add("reaction", "an allergy's reaction changed")
    elif table == "medication_requests" and old.get("status") in ACTIVE_ORDERS:
        for field in ORDER_FIELDS:
            if field in new and new[field] != old.get(field):
                add(field, "an active medication changed")
    return found


# -- physiological limits ------------------------------------------------------------------------
def _units(*names: str) -> frozenset[str]:
    return frozenset(n.lower() for n in names)


PERCENT = _units("%")
MG_DL = _units("mg/dL")
MMOL_L = _units("mmol/L", "meq/L")
PER_UL = _units("10^3/uL", "10*3/uL", "10*3/ul", "K/uL")
MMHG = _units("mmHg", "mm[Hg]")
EGFR_UNITS = _units("mL/min/1.73m2", "mL/min/{1.73_m2}", "mL/min")
PER_MIN = _units("/min", "beats/min", "breaths/min", "{beats}/min", "{breaths}/min", "bpm")
# LOINC -> (low, high, units the limits are in). Generous: a value outside is not a human one.
LIMITS: dict[str, tuple[float, float, frozenset[str]]] = {
    "4548-4": (2.0, 25.0, PERCENT),  # HbA1c
    "17856-6": (2.0, 25.0, PERCENT),  # HbA1c (HPLC)
    "4549-2": (2.0, 25.0, PERCENT),  # HbA1c (electrophoresis)
    "59261-8": (0.0, 250.0, _units("mmol/mol")),  # HbA1c (IFCC)
    "2345-7": (5.0, 3000.0, MG_DL),  # glucose
    "2339-0": (5.0, 3000.0, MG_DL),  # glucose, blood
    "2160-0": (0.05, 40.0, MG_DL),  # creatinine
    "38483-4": (0.05, 40.0, MG_DL),  # creatinine, blood
    "14682-9": (4.0, 3600.0, _units("umol/L", "µmol/L")),  # creatinine, molar
    **{code: (0.0, 250.0, EGFR_UNITS) for code in ("33914-3", "48642-3", "48643-1", "62238-1", "88293-6",
                                                   "88294-4", "98979-8")},  # eGFR
    "3094-0": (0.5, 300.0, MG_DL),  # BUN
    "2823-3": (0.5, 15.0, MMOL_L),  # potassium
    "6298-4": (0.5, 15.0, MMOL_L),  # potassium, blood
    "2951-2": (80.0, 220.0, MMOL_L),  # sodium
    "17861-6": (1.0, 25.0, MG_DL),  # calcium
    "718-7": (0.5, 30.0, _units("g/dL")),  # hemoglobin
    "6690-2": (0.0, 1000.0, PER_UL),  # WBC
    "777-3": (0.0, 5000.0, PER_UL),  # platelets
    **{code: (0.3, 25.0, _units("", "{INR}", "INR", "ratio")) for code in ("6301-6", "34714-6", "46418-0")},  # INR
    "8634-8": (100.0, 1000.0, _units("ms")),  # QT interval
    "8636-3": (100.0, 1000.0, _units("ms")),  # QTc interval
    "2093-3": (10.0, 3000.0, MG_DL),  # total cholesterol
    "8480-6": (20.0, 350.0, MMHG),  # systolic
    "8462-4": (10.0, 250.0, MMHG),  # diastolic
    "8867-4": (10.0, 350.0, PER_MIN),  # heart rate
    "9279-1": (1.0, 120.0, PER_MIN),  # respiratory rate
    "8310-5": (20.0, 46.0, _units("Cel", "°C", "C", "degC")),  # body temperature
    "59408-5": (10.0, 100.0, PERCENT),  # SpO2
    "29463-7": (0.2, 700.0, _units("kg")),  # body weight
    **{code: (0.2, 700.0, _units("kg")) for code in ("3141-9", "3142-7", "8350-1", "8351-9")},  # other weights
    "8302-2": (20.0, 275.0, _units("cm")),  # body height
    "39156-5": (5.0, 250.0, _units("kg/m2")),  # BMI
}


def _number(value: Any) -> str:
    return f"{value:g}"


def value_problem(field: str, value: Any, loinc: str | None = None, unit: str | None = None) -> str | None:
    """Why ``value`` (of ``field``) may not be imported, or None."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value):
        return f"{field} is not a finite number"
    limits = LIMITS.get(loinc or "")
    if limits is not None and (unit or "").strip().lower() in limits[2]:
        low, high, _ = limits
        if not low <= value <= high:
            shown = f" {unit}" if unit else ""
            return f"{field} is outside physiological limits for LOINC {loinc} ({_number(low)}-{_number(high)}{shown})"
    if abs(value) > GENERIC_LIMIT:
        return f"{field} is outside physiological limits (more than {GENERIC_LIMIT:g} in size)"
    return None
