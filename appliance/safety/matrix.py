"""The safety gate's hand-written expectations over the real demo charts: 13 patients x 23 drugs,
and ``run_matrix``, which checks the gate against them (the test suite and ``appliance selftest``).

Each cell lists the findings expected above "info" level as codes: the kind's letter and the
severity's (H high, M moderate, L low), one code per finding ("IH IM" = two interactions, one
high and one moderate); "-" means no finding. They were written from the patients' records in
``ehr_db/demo/patients.json`` (as of 2026-11-01, ``AS_OF``) and the rules the gate documents
(local drug and interaction data, ``appliance/safety/classes.py`` and ``rules.py``), not from the
gate's output. Info-level findings (medications the interaction data does not know, no eGFR on
file) are checked by the unit tests instead.

Rule change (issue 22): the same ingredient ordered twice is a high duplicate (a double dose),
whatever its class; two members of a class keep the class's curated severity. Six cells changed
from DM to DH accordingly: abc-123 metformin and lisinopril, pat-005 lisinopril, pat-006
sertraline, pat-010 methotrexate and pat-012 donepezil (each already on that drug). Class
duplicates (losartan with lisinopril, simvastatin with atorvastatin, sertraline with
escitalopram) stay DM. Brand and combination names are covered by ``generated_matrix``.

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

DRUGS = (
    "amoxicillin", "cephalexin", "trimethoprim-sulfamethoxazole", "ibuprofen", "aspirin", "warfarin", "apixaban",
    "metformin", "lisinopril", "losartan", "simvastatin", "tramadol", "codeine", "clarithromycin", "spironolactone",
    "methotrexate", "ciprofloxacin", "sertraline", "dofetilide", "oxcarbazepine", "diphenhydramine", "zorbitravine",
    "donepezil",
)
# Not among the 33 drugs of mcp_servers/data/knowledge/drugs.json ("zorbitravine" is made up).
UNKNOWN_TO_DATA = {"cephalexin", "trimethoprim-sulfamethoxazole", "losartan", "codeine", "oxcarbazepine",
                   "diphenhydramine", "zorbitravine", "donepezil"}

MATRIX = {
    # John Smith, 68: hypertension, type 2 diabetes, CKD stage 3 with eGFR 42; metformin, lisinopril,
    # atorvastatin, amlodipine; sulfamethoxazole allergy (rash, moderate).
    "abc-123": """
        amoxicillin: -
        cephalexin: UM
        trimethoprim-sulfamethoxazole: AH IM UM
        ibuprofen: IM RM GM
        aspirin: GM
        warfarin: GM
        apixaban: RM
        metformin: DH RM GL
        lisinopril: DH RL
        losartan: UM DM RL
        simvastatin: IM DM
        tramadol: -
        codeine: UM
        clarithromycin: IH IM
        spironolactone: IH RM
        methotrexate: RM
        ciprofloxacin: IM RL GL
        sertraline: GL
        dofetilide: RM
        oxcarbazepine: UM
        diphenhydramine: UM GM
        zorbitravine: UM
        donepezil: UM
    """,
    # Robert Chen, 74: atrial fibrillation, heart failure, eGFR 61; warfarin, metoprolol succinate,
    # furosemide, lisinopril; amiodarone allergy.
    "pat-005": """
        amoxicillin: -
        cephalexin: UM
        trimethoprim-sulfamethoxazole: IH IM UM
        ibuprofen: IH IM IM GM
        aspirin: IH GM
        warfarin: DH GM
        apixaban: IH DH
        metformin: GL
        lisinopril: DH IM
        losartan: UM DM
        simvastatin: -
        tramadol: -
        codeine: UM
        clarithromycin: IM
        spironolactone: IH
        methotrexate: -
        ciprofloxacin: IM GL
        sertraline: IM GL
        dofetilide: IM
        oxcarbazepine: UM
        diphenhydramine: UM GM
        zorbitravine: UM
        donepezil: UM
    """,
    # Emily Johnson, 41: anxiety; sertraline; penicillin allergy (anaphylaxis, severe).
    "pat-006": """
        amoxicillin: AH
        cephalexin: XH UM
        trimethoprim-sulfamethoxazole: UM
        ibuprofen: IM
        aspirin: IM
        warfarin: IM
        apixaban: IM
        metformin: -
        lisinopril: -
        losartan: UM
        simvastatin: -
        tramadol: IH
        codeine: UM
        clarithromycin: -
        spironolactone: -
        methotrexate: -
        ciprofloxacin: -
        sertraline: DH
        dofetilide: -
        oxcarbazepine: UM
        diphenhydramine: UM
        zorbitravine: UM
        donepezil: UM
    """,
    # Sophia Martinez, 8: asthma; albuterol, fluticasone, epinephrine auto-injector; peanut allergy.
    "pat-007": """
        amoxicillin: GM
        cephalexin: UM GM
        trimethoprim-sulfamethoxazole: UM GM
        ibuprofen: GM
        aspirin: GM
        warfarin: GM
        apixaban: GM
        metformin: GM
        lisinopril: GM
        losartan: UM GM
        simvastatin: GM
        tramadol: GH
        codeine: UM GH
        clarithromycin: GM
        spironolactone: GM
        methotrexate: GM
        ciprofloxacin: GM
        sertraline: GM
        dofetilide: GM
        oxcarbazepine: UM GM
        diphenhydramine: UM GM
        zorbitravine: UM GM
        donepezil: UM GM
    """,
    # Aisha Patel, 31: pregnancy, anaemia; prenatal multivitamin, ferrous sulfate.
    "pat-008": """
        amoxicillin: -
        cephalexin: UM
        trimethoprim-sulfamethoxazole: UM PM
        ibuprofen: PM
        aspirin: PM
        warfarin: PH
        apixaban: PM
        metformin: -
        lisinopril: PH
        losartan: UM PH
        simvastatin: PM
        tramadol: PM
        codeine: UM PM
        clarithromycin: PM
        spironolactone: -
        methotrexate: PH
        ciprofloxacin: IM
        sertraline: -
        dofetilide: -
        oxcarbazepine: UM PM
        diphenhydramine: UM
        zorbitravine: UM
        donepezil: UM
    """,
    # Linda Nguyen, 68: rheumatoid arthritis; methotrexate, folic acid, prednisone, alendronate;
    # sulfasalazine allergy (rash and fever, moderate); no eGFR on file.
    "pat-010": """
        amoxicillin: IH
        cephalexin: UM
        trimethoprim-sulfamethoxazole: XH IH UM
        ibuprofen: IH IM GM
        aspirin: IH IM GM
        warfarin: IM GM
        apixaban: -
        metformin: IM GL
        lisinopril: -
        losartan: UM
        simvastatin: -
        tramadol: -
        codeine: UM
        clarithromycin: -
        spironolactone: -
        methotrexate: DH
        ciprofloxacin: IH IM GL
        sertraline: GL
        dofetilide: -
        oxcarbazepine: UM
        diphenhydramine: UM GM
        zorbitravine: UM
        donepezil: UM
    """,
    # Patricia Davis, 82: Alzheimer's disease; donepezil, amlodipine, acetaminophen; aspirin
    # allergy (upper GI bleeding, severe).
    "pat-012": """
        amoxicillin: -
        cephalexin: UM
        trimethoprim-sulfamethoxazole: UM
        ibuprofen: XH GM
        aspirin: AH GM
        warfarin: IM GM
        apixaban: -
        metformin: GL
        lisinopril: -
        losartan: UM
        simvastatin: IM
        tramadol: -
        codeine: UM
        clarithromycin: IM
        spironolactone: -
        methotrexate: -
        ciprofloxacin: GL
        sertraline: GL
        dofetilide: -
        oxcarbazepine: UM
        diphenhydramine: UM GM
        zorbitravine: UM
        donepezil: UM DH
    """,
    # William Anderson, 76: CKD stage 4 with eGFR 24; insulin glargine, amlodipine, furosemide
    # (metformin stopped); lisinopril allergy (angioedema, severe).
    "pat-015": """
        amoxicillin: -
        cephalexin: UM
        trimethoprim-sulfamethoxazole: UM RM
        ibuprofen: IM RH GM
        aspirin: GM
        warfarin: GM
        apixaban: RM
        metformin: RH IL GL
        lisinopril: AH IM RM
        losartan: XM UM RL
        simvastatin: IM
        tramadol: RM
        codeine: UM RM
        clarithromycin: IM
        spironolactone: RH
        methotrexate: RH
        ciprofloxacin: IM RM GL
        sertraline: GL
        dofetilide: RM IM
        oxcarbazepine: UM
        diphenhydramine: UM GM
        zorbitravine: UM
        donepezil: UM
    """,
    # Olivia Taylor, 25: asthma, anxiety; albuterol, montelukast, escitalopram; ibuprofen allergy
    # (bronchospasm, severe). None of her medications is in the local interaction data.
    "pat-016": """
        amoxicillin: -
        cephalexin: UM
        trimethoprim-sulfamethoxazole: UM
        ibuprofen: AH IM
        aspirin: XH IM
        warfarin: IM
        apixaban: IM
        metformin: -
        lisinopril: -
        losartan: UM
        simvastatin: -
        tramadol: IH
        codeine: UM
        clarithromycin: -
        spironolactone: -
        methotrexate: -
        ciprofloxacin: -
        sertraline: DM
        dofetilide: -
        oxcarbazepine: UM
        diphenhydramine: UM
        zorbitravine: UM
        donepezil: UM
    """,
    # Charles Robinson, 88: Parkinson's disease, atrial fibrillation, heart failure, eGFR 48;
    # carbidopa/levodopa, apixaban, carvedilol, furosemide; morphine allergy (confusion, moderate).
    "pat-017": """
        amoxicillin: -
        cephalexin: UM
        trimethoprim-sulfamethoxazole: UM
        ibuprofen: IH IM RM GM
        aspirin: IH GM
        warfarin: IH DH GM
        apixaban: DH RM
        metformin: RL GL
        lisinopril: IM RL
        losartan: UM RL
        simvastatin: -
        tramadol: -
        codeine: XM UM
        clarithromycin: -
        spironolactone: RM
        methotrexate: RM
        ciprofloxacin: RL GL
        sertraline: IM GL
        dofetilide: IM RM
        oxcarbazepine: UM
        diphenhydramine: UM GM
        zorbitravine: UM
        donepezil: UM
    """,
    # Daniel Murphy, 50: epilepsy; levetiracetam; carbamazepine allergy (Stevens-Johnson syndrome).
    "pat-019": """
        amoxicillin: -
        cephalexin: UM
        trimethoprim-sulfamethoxazole: UM
        ibuprofen: -
        aspirin: -
        warfarin: -
        apixaban: -
        metformin: -
        lisinopril: -
        losartan: UM
        simvastatin: -
        tramadol: -
        codeine: UM
        clarithromycin: -
        spironolactone: -
        methotrexate: -
        ciprofloxacin: -
        sertraline: -
        dofetilide: -
        oxcarbazepine: XH UM
        diphenhydramine: UM
        zorbitravine: UM
        donepezil: UM
    """,
    # Ethan Clark, 12: ADHD; methylphenidate extended-release; egg allergy. Twelve is not under 12,
    # so codeine and tramadol get the general paediatric note only.
    "pat-022": """
        amoxicillin: GM
        cephalexin: UM GM
        trimethoprim-sulfamethoxazole: UM GM
        ibuprofen: GM
        aspirin: GM
        warfarin: GM
        apixaban: GM
        metformin: GM
        lisinopril: GM
        losartan: UM GM
        simvastatin: GM
        tramadol: GM
        codeine: UM GM
        clarithromycin: GM
        spironolactone: GM
        methotrexate: GM
        ciprofloxacin: GM
        sertraline: GM
        dofetilide: GM
        oxcarbazepine: UM GM
        diphenhydramine: UM GM
        zorbitravine: UM GM
        donepezil: UM GM
    """,
    # Susan White, 66: deep vein thrombosis, osteoarthritis; rivaroxaban (not in the local data),
    # hydrochlorothiazide, acetaminophen; naproxen allergy (dyspepsia, mild); no eGFR on file.
    "pat-023": """
        amoxicillin: -
        cephalexin: UM
        trimethoprim-sulfamethoxazole: UM
        ibuprofen: XM IM IH GM
        aspirin: XM IH GM
        warfarin: DH IM GM
        apixaban: DH
        metformin: GL
        lisinopril: IM
        losartan: UM
        simvastatin: -
        tramadol: -
        codeine: UM
        clarithromycin: -
        spironolactone: -
        methotrexate: -
        ciprofloxacin: GL
        sertraline: IM GL
        dofetilide: IH
        oxcarbazepine: UM
        diphenhydramine: UM GM
        zorbitravine: UM
        donepezil: UM
    """,
}


def _parse(table: str) -> dict[str, Counter]:
    cells = {}
    for line in table.strip().splitlines():
        drug, _, codes = line.strip().partition(": ")
        cells[drug] = Counter(
            (KINDS[code[0]], SEVERITY[code[1]]) for code in codes.split() if code != "-"
        )
    return cells


EXPECTED = {patient: _parse(table) for patient, table in MATRIX.items()}


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
