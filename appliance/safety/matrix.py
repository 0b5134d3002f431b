"""The safety gate's hand-written expectations over the real demo charts: 13 patients x 23 drugs,
read from ``data/safety_matrix.tsv``, and ``run_matrix``, which checks the gate against them (the
test suite and ``appliance selftest``).

Each cell of the table lists the findings expected above "info" level as codes: the kind's
letter and the severity's (H high, M moderate, L low), one code per finding ("IH IM" = two
interactions, one high and one moderate); "-" means no finding. They were written from the patients' records in
``ehr_db/demo/patients.json`` (as of 2026-11-01, ``AS_OF``) and the rules the gate documents
(local drug and interaction data, ``appliance/safety/classes.py`` and ``rules.py``), not from the
gate's output. Info-level findings (medications the interaction data does not know, no eGFR on
file) are checked by the unit tests instead.

Duplicates: the same ingredient ordered twice is a high duplicate (a double dose), whatever its
class, so a drug the patient already takes is DH (abc-123 metformin and lisinopril, pat-005
lisinopril, pat-006 sertraline, pat-010 methotrexate, pat-012 donepezil); two members of a class
keep the class's curated severity, so class duplicates (losartan with lisinopril, simvastatin
with atorvastatin, sertraline with escitalopram) stay DM. Brand and combination names are
covered by ``generated_matrix``.

Invariant: ``run_matrix`` only reads the two databases it is given, with every age taken on
``AS_OF``; it counts, it never raises for a wrong cell.
"""

from __future__ import annotations

from collections import Counter
from datetime import date
from pathlib import Path

from appliance.safety.gate import check_prescription
from appliance.safety.knowledge import StoreKnowledge
from appliance.safety.report import UNKNOWN_DRUG_TEXT

# The demo file's "as_of" date: every age in the table is taken on it.
AS_OF = date(2026, 11, 1)

KINDS = {"A": "allergy", "X": "cross_reactivity", "I": "interaction", "D": "duplicate", "P": "pregnancy",
         "R": "renal", "G": "age", "U": "unknown_drug", "N": "not_checked"}
SEVERITY = {"H": "high", "M": "moderate", "L": "low"}

TABLE_PATH = Path(__file__).resolve().parent / "data" / "safety_matrix.tsv"
# Not in the local drug data (mcp_servers/knowledge/data: drugs.json and drugs_primary_care.json);
# "zorbitravine" is made up.
UNKNOWN_TO_DATA = {"zorbitravine"}


def _cell(codes: str) -> Counter:
    return Counter((KINDS[code[0]], SEVERITY[code[1]]) for code in codes.split() if code != "-")


def parse_table(text: str) -> tuple[tuple[str, ...], dict[str, dict[str, Counter]]]:
    """(the drugs, in column order; every patient's expected findings by drug) from the TSV."""
    rows = [line.split("\t") for line in text.splitlines() if line.strip() and not line.startswith("#")]
    header, *body = rows
    drugs = tuple(header[1:])
    expected = {}
    for patient, *cells in body:
        if len(cells) != len(drugs):
            raise ValueError(f"{TABLE_PATH.name}: {patient} has {len(cells)} cells for {len(drugs)} drugs")
        expected[patient] = {drug: _cell(codes) for drug, codes in zip(drugs, cells)}
    return drugs, expected


DRUGS, EXPECTED = parse_table(TABLE_PATH.read_text(encoding="utf-8"))


def actual(report) -> Counter:
    """(kind, severity) of every finding above info level, counted."""
    return Counter((f.kind, f.severity) for f in report.findings if f.severity != "info")


def cell_problems(drug: str, expected: Counter, report) -> tuple[Counter, Counter, bool]:
    """(missed, false alarms, false clear) of one cell. A false clear: the table expects a finding
    (or the drug is unknown to the local data) and the gate reported none above info, or an
    unknown drug's report lacks the unknown-drug finding."""
    found = actual(report)
    clear = not found
    unknown_ok = True
    if drug in UNKNOWN_TO_DATA:
        unknown = [f for f in report.findings if f.kind == "unknown_drug"]
        unknown_ok = bool(unknown) and UNKNOWN_DRUG_TEXT in unknown[0].text and "no findings" not in report.formatted()
    false_clear = (clear and bool(expected)) or not unknown_ok
    return expected - found, found - expected, false_clear


def run_matrix(ehr_db_path: Path | str, knowledge_db_path: Path | str) -> dict:
    """Every cell of the table against the gate on these databases: ``cases`` (cells), ``missed``
    and ``false_alarms`` (findings), ``false_clear`` (cells), ``findings`` above info by kind,
    ``blocking`` cells and the cells that differ (``problems``, for the reader)."""
    from ehr_db.repository import EhrRepository

    repo, knowledge = EhrRepository(ehr_db_path), StoreKnowledge(knowledge_db_path)
    missed, false_alarms, by_kind = Counter(), Counter(), Counter()
    false_clear, blocking, problems = 0, 0, []
    try:
        for patient, cells in EXPECTED.items():
            chart = repo.get_patient_chart(patient, today=AS_OF)
            for drug, expected in cells.items():
                report = check_prescription(drug, chart, knowledge)
                miss, alarm, clear = cell_problems(drug, expected, report)
                missed += miss
                false_alarms += alarm
                false_clear += clear
                blocking += report.blocking
                by_kind.update(kind for kind, _ in actual(report).elements())
                if miss or alarm or clear:
                    problems.append(f"{patient} {drug}: missed {dict(miss)}, false alarms {dict(alarm)}"
                                    + (", reported clear" if clear else "") + ": " + " | ".join(report.lines()))
    finally:
        knowledge.close()
    return {"cases": sum(len(cells) for cells in EXPECTED.values()), "patients": len(EXPECTED), "drugs": len(DRUGS),
            "missed": sum(missed.values()), "false_alarms": sum(false_alarms.values()), "false_clear": false_clear,
            "findings": dict(sorted(by_kind.items())), "blocking": blocking, "problems": problems}
