"""The drug data matrix: the safety gate over every drug the local data holds, as ``appliance
selftest`` runs it (its fourth matrix, beside the curated, generated and control ones).

Invariants:
- Every drug of the knowledge database is prescribed under its generic name and under each of
  its brand names against the control matrix's chart (``control_matrix.CONTROL_CHART``); each
  must resolve to that drug, and none may come back unchecked except the brands in
  ``PARTLY_CHECKED`` (the dictionary lists an ingredient the data holds no drug for: the data's
  own generic is checked, the other part is said to be unchecked).
- Every interaction pair of the data is found, whichever of the two is prescribed (by its
  generic and by its first brand) against a chart holding the other, at least as severe as the
  data says (``gate.INTERACTION_SEVERITY``).
- Reads only: the knowledge database (``StoreKnowledge``) and the built-in chart.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path

from appliance.safety.control_matrix import CONTROL_CHART
from appliance.safety.gate import INTERACTION_SEVERITY, check_prescription
from appliance.safety.knowledge import StoreKnowledge
from appliance.safety.report import SEVERITIES, UNCHECKED_KINDS

# "Klor-Con M": potassium chloride and "potassium"; "Ortho Micronor": norethindrone and
# "progestin only oral contraceptives".
PARTLY_CHECKED = frozenset({"Klor-Con M", "Ortho Micronor"})


def _drugs(knowledge_db_path: Path | str) -> list[tuple[str, list[str]]]:
    conn = sqlite3.connect(f"file:{knowledge_db_path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT generic_name, brand_names FROM drugs ORDER BY generic_name").fetchall()
    finally:
        conn.close()
    return [(generic, json.loads(brands) if brands else []) for generic, brands in rows]


def _interactions(knowledge_db_path: Path | str) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(f"file:{knowledge_db_path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT drug_a, drug_b, severity FROM interactions ORDER BY drug_a, drug_b").fetchall()
    finally:
        conn.close()


def _on(drug: str) -> dict:
    chart = copy.deepcopy(CONTROL_CHART)
    chart["medications"] = [{"medication_name": drug, "status": "active", "dosage": None, "frequency": None}]
    return chart


def run_data_matrix(knowledge_db_path: Path | str) -> dict:
    """The gate over every drug, brand and interaction pair of the data: counts, and each name
    not resolved to its drug, each unexpectedly unchecked name and each missed interaction."""
    drugs, pairs = _drugs(knowledge_db_path), _interactions(knowledge_db_path)
    brands = dict(drugs)
    knowledge = StoreKnowledge(knowledge_db_path)
    not_resolved, unchecked, missed = [], [], []
    names = cases = 0
    try:
        for generic, brand_names in drugs:
            for name in (generic, *brand_names):
                names += 1
                report = check_prescription(name, CONTROL_CHART, knowledge)
                if generic not in report.resolved:
                    not_resolved.append({"name": name, "drug": generic, "resolved": list(report.resolved)})
                if name not in PARTLY_CHECKED and any(f.kind in UNCHECKED_KINDS and f.severity != "info"
                                                      for f in report.findings):
                    unchecked.append(name)
        for a, b, severity in pairs:
            want = SEVERITIES.index(INTERACTION_SEVERITY[severity])
            for prescribed, held in ((a, b), (b, a)):
                for name in (prescribed, *brands.get(prescribed, [])[:1]):
                    cases += 1
                    found = [f for f in check_prescription(name, _on(held), knowledge).findings
                             if f.kind == "interaction"]
                    if not any(SEVERITIES.index(f.severity) <= want for f in found):
                        missed.append({"prescribed": name, "on": held, "severity": severity})
    finally:
        knowledge.close()
    return {"drugs": len(drugs), "drugs_with_brands": sum(1 for _, b in drugs if b), "names": names,
            "not_resolved": not_resolved, "unchecked": unchecked, "partly_checked": sorted(PARTLY_CHECKED),
            "interaction_pairs": len(pairs), "interaction_cases": cases, "missed": missed}


__all__ = ["PARTLY_CHECKED", "run_data_matrix"]
