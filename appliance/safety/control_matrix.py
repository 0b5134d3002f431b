"""The gate's control matrix: common safe orders it must let through, and hazardous orders it
must stop, each written as a clinician writes it and read the way the agent reads it (the order
parser, then ``check_prescription`` with the dosage, frequency and notes it read).

- Safe orders (``data/control_orders.tsv``): the most prescribed primary-care drugs at standard
  adult doses, generic and brand, with standard sigs, for ``CONTROL_CHART``: a built chart of a
  45-year-old man with nothing that contraindicates any of them (no allergies, no medications, no
  problems, eGFR 95, weight 80 kg). A false refusal is a safe order whose report
  ``needs_override`` (a high finding, or anything unchecked); each is listed with what was not
  checked, so alarms on safe orders are measured beside missed hazards.
- Hazard orders (``data/hazard_orders.tsv``): orders a pharmacist stops, on a demo patient (or
  the control chart), each with the finding expected (severity, kind, words in its text). A miss:
  no such finding, or a report that does not need an override.

Invariant: ``run_control_matrix`` only reads the two databases it is given (charts on
``matrix.AS_OF``); it counts, it never raises for a wrong row; it keeps no patient data beyond
the orders and the findings' lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from appliance.medication.orders import parse_order
from appliance.safety.gate import check_prescription
from appliance.safety.ingredients import default_resolver
from appliance.safety.knowledge import StoreKnowledge
from appliance.safety.matrix import AS_OF

DATA = Path(__file__).resolve().parent / "data"
SAFE_PATH = DATA / "control_orders.tsv"
HAZARD_PATH = DATA / "hazard_orders.tsv"
CONTROL = "control"  # the hazard table's name for CONTROL_CHART

CONTROL_CHART: dict = {
    "patient": {"patient_id": CONTROL, "name": "Control Patient", "birth_date": "1981-05-01", "age": 45,
                "sex": "male", "mrn": None, "deceased_date": None},
    "synthetic_demo_record": True,
    "active_problems": [],
    "medications": [],
    "allergies": [],
    "labs": [{"display": "eGFR (CKD-EPI 2021)", "loinc_code": "98979-8", "value": 95, "unit": "mL/min/1.73m2",
              "effective_at": "2026-10-01"}],
    "vitals": [{"display": "Body weight", "loinc_code": "29463-7", "value": 80, "unit": "kg",
                "effective_at": "2026-10-01"}],
    "recent_notes": [],
}


@dataclass(frozen=True)
class Hazard:
    patient: str
    order: str
    severity: str
    kind: str
    words: str  # words the finding's text must contain (case-insensitive)


def _rows(text: str) -> list[list[str]]:
    rows = [line.split("\t") for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return rows[1:]  # the header


def safe_orders(text: str | None = None) -> list[str]:
    return [row[0].strip() for row in _rows(SAFE_PATH.read_text(encoding="utf-8") if text is None else text)]


def hazard_orders(text: str | None = None) -> list[Hazard]:
    rows = _rows(HAZARD_PATH.read_text(encoding="utf-8") if text is None else text)
    out = []
    for number, row in enumerate(rows, start=1):
        if len(row) != 5:
            raise ValueError(f"{HAZARD_PATH.name}: row {number} has {len(row)} fields, expected 5")
        out.append(Hazard(*(f.strip() for f in row)))
    return out


def check_words(words: str, chart: dict, knowledge):
    """The gate on one order as the agent reads the clinician's words."""
    order = parse_order(words, default_resolver().recogniser)
    return check_prescription(order.drug_text or words, chart, knowledge, dosage=order.dosage_text,
                              frequency=order.frequency_text, notes=order.duration_text)


def hazard_missed(hazard: Hazard, report) -> bool:
    found = [f for f in report.findings if (f.severity, f.kind) == (hazard.severity, hazard.kind)
             and hazard.words.lower() in f.text.lower()]
    return not found or not report.needs_override


def run_control_matrix(ehr_db_path: Path | str, knowledge_db_path: Path | str) -> dict:
    """Every safe and hazard order against the gate on these databases: counts, the refusal
    rate, and each false refusal (with what was not checked) and each miss (with the lines)."""
    from ehr_db.repository import EhrRepository

    repo, knowledge = EhrRepository(ehr_db_path), StoreKnowledge(knowledge_db_path)
    refusals, missed = [], []
    safe, hazards = safe_orders(), hazard_orders()
    try:
        for words in safe:
            report = check_words(words, CONTROL_CHART, knowledge)
            if report.needs_override:
                refusals.append({"order": words, "unchecked": report.unchecked,
                                 "high": [f.text for f in report.by_severity("high")]})
        charts: dict[str, dict] = {CONTROL: CONTROL_CHART}
        for hazard in hazards:
            if hazard.patient not in charts:
                charts[hazard.patient] = repo.get_patient_chart(hazard.patient, today=AS_OF)
            report = check_words(hazard.order, charts[hazard.patient], knowledge)
            if hazard_missed(hazard, report):
                missed.append({"patient": hazard.patient, "order": hazard.order,
                               "expected": f"{hazard.severity} {hazard.kind}: {hazard.words}",
                               "findings": report.lines()})
    finally:
        knowledge.close()
    return {"safe_orders": len(safe), "false_refusals": len(refusals),
            "refusal_rate": round(len(refusals) / len(safe), 4) if safe else 0.0, "refusals": refusals,
            "hazard_orders": len(hazards), "missed_hazards": len(missed), "missed": missed}


__all__ = ["CONTROL", "CONTROL_CHART", "Hazard", "check_words", "hazard_missed", "hazard_orders",
           "run_control_matrix", "safe_orders"]
