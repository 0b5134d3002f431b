"""Unit tests for each check of the medication safety gate, on small hand-made charts."""

from __future__ import annotations

import pytest

from appliance.safety import check_prescription
from appliance.safety.chart import renal_status
from appliance.safety.classes import (
    CLASSES,
    KNOWN_INGREDIENTS,
    RXNORM_TO_INGREDIENT,
    classes_named_in,
    ingredients_in,
)
from appliance.safety.rules import (
    BEERS,
    CLASS_INTERACTIONS,
    PAEDIATRIC,
    PREGNANCY,
    RENAL,
)
from ehr_db.codes import RXNORM_INGREDIENTS
from tests.safety.safety_helpers import FakeKnowledge, codes, make_chart, safety_of

CKD3 = ("Chronic kidney disease stage 3", "433144002")
PREGNANT = ("Pregnancy", "77386006")


# -- the tables ------------------------------------------------------------------------------
def test_every_rule_key_names_a_recognised_ingredient_or_class():
    keys = set(PREGNANCY) | set(RENAL) | set(PAEDIATRIC) | set(BEERS)
    keys |= {k for rule in CLASS_INTERACTIONS for k in rule.a | rule.b}
    for key in keys:
        kind, _, name = key.partition(":")
        assert (name in CLASSES) if kind == "class" else (name in KNOWN_INGREDIENTS), key
    for cls in CLASSES.values():
        assert cls.members <= KNOWN_INGREDIENTS


def test_rxnorm_codes_come_only_from_the_checked_catalogue():
    assert RXNORM_TO_INGREDIENT == {code: name for name, code in RXNORM_INGREDIENTS.items()}


@pytest.mark.parametrize("name, expected", [
    ("Trimethoprim-sulfamethoxazole DS", {"trimethoprim", "sulfamethoxazole"}),
    ("co-trimoxazole 960 mg", {"trimethoprim", "sulfamethoxazole"}),
    ("Carbidopa/levodopa 25/100", set()),  # neither is in the tables: recognised by name only
    ("Metoprolol succinate", {"metoprolol"}),
    ("Augmentin", {"amoxicillin", "clavulanate"}),
    ("insulin glargine", {"insulin glargine"}),
    ("Penicillin V potassium", {"penicillin v"}),
    ("zorbitravine", set()),
])
def test_ingredients_in_names(name, expected):
    assert ingredients_in(name) == expected


@pytest.mark.parametrize("substance, expected", [
    ("Penicillin", {"penicillins"}), ("Penicillins", {"penicillins"}), ("Sulfa drugs", {"sulfonamide_antibiotics"}),
    ("NSAIDs", {"nsaids"}), ("ACE inhibitors", {"ace_inhibitors"}), ("Amoxicillin", set()), ("Peanut", set()),
])
def test_allergen_class_names(substance, expected):
    assert classes_named_in(substance) == expected


# -- allergies -------------------------------------------------------------------------------
ALLERGY_CASES = [
    # substance, reaction, severity, drug, expected (kind, severity) or None
    ("Amoxicillin", "Hives", "mild", "amoxicillin", ("allergy", "high")),
    ("Penicillin", "Rash", "mild", "amoxicillin", ("allergy", "high")),  # a penicillin allergy is a class label
    ("Amoxicillin", "Rash", "mild", "ampicillin", ("cross_reactivity", "high")),
    ("Penicillin", "Anaphylaxis", "severe", "cephalexin", ("cross_reactivity", "high")),
    ("Penicillin", "Rash", "mild", "cephalexin", ("cross_reactivity", "moderate")),
    ("Penicillin", "Rash", "mild", "meropenem", ("cross_reactivity", "low")),
    ("Cephalexin", "Rash", "mild", "amoxicillin", ("cross_reactivity", "moderate")),
    ("Sulfasalazine", "Rash", "moderate", "sulfamethoxazole-trimethoprim", ("cross_reactivity", "high")),
    ("Sulfa drugs", "Rash", "moderate", "Bactrim", ("allergy", "high")),
    ("Sulfamethoxazole", "Rash", "moderate", "furosemide", ("cross_reactivity", "low")),
    ("Sulfamethoxazole", "Rash", "moderate", "hydrochlorothiazide", ("cross_reactivity", "low")),
    ("Ibuprofen", "Bronchospasm", "severe", "naproxen", ("cross_reactivity", "high")),
    ("Naproxen", "Dyspepsia", "mild", "ibuprofen", ("cross_reactivity", "moderate")),
    ("Ibuprofen", "Urticaria", "moderate", "celecoxib", ("cross_reactivity", "low")),
    ("NSAIDs", "Urticaria", "moderate", "celecoxib", ("cross_reactivity", "low")),
    ("Lisinopril", "Angioedema", "severe", "enalapril", ("cross_reactivity", "high")),
    ("Lisinopril", "Angioedema", "severe", "losartan", ("cross_reactivity", "moderate")),
    ("Lisinopril", "Dry cough", "mild", "losartan", None),  # an ARB is the usual alternative after ACE cough
    ("Morphine", "Pruritus", "mild", "oxycodone", ("cross_reactivity", "moderate")),
    ("Morphine", "Pruritus", "mild", "fentanyl", None),  # a phenylpiperidine, not a phenanthrene
    ("Carbamazepine", "Stevens-Johnson syndrome", None, "oxcarbazepine", ("cross_reactivity", "high")),
    ("Atorvastatin", "Myalgia", "mild", "simvastatin", ("cross_reactivity", "low")),
    ("Zorbitravine", "Rash", "mild", "zorbitravine 5 mg", ("allergy", "high")),  # by name, unknown drug
    ("Peanut", "Anaphylaxis", "severe", "amoxicillin", None),
    ("Latex", "Dermatitis", "mild", "lisinopril", None),
]


@pytest.mark.parametrize("substance, reaction, severity, drug, expected", ALLERGY_CASES)
def test_allergy_and_cross_reactivity(substance, reaction, severity, drug, expected, knowledge):
    chart = make_chart(allergies=[(substance, reaction, severity)])
    found = {(f.kind, f.severity) for f in check_prescription(drug, chart, knowledge).findings
             if f.kind in ("allergy", "cross_reactivity")}
    assert found == ({expected} if expected else set())


def test_allergy_matched_by_rxnorm_code_and_evidence_kept(knowledge):
    chart = make_chart(allergies=[("Coumadin tablets", "Bleeding", "severe")])
    chart["allergies"][0]["substance_code"] = "11289"  # warfarin's RxNorm ingredient code
    report = check_prescription("warfarin", chart, knowledge)
    allergy = [f for f in report.findings if f.kind == "allergy"]
    assert allergy and allergy[0].severity == "high"
    assert allergy[0].evidence["allergy"]["substance_code"] == "11289"


# -- interactions ----------------------------------------------------------------------------
@pytest.mark.parametrize("drug, med, expected", [
    ("clarithromycin", "Simvastatin", ("interaction", "high")),  # contraindicated in the data
    ("aspirin", "Warfarin", ("interaction", "high")),  # major
    ("sertraline", "Warfarin", ("interaction", "moderate")),
    ("metformin", "Insulin glargine", ("interaction", "low")),  # minor
    ("tramadol", "Escitalopram", ("interaction", "high")),  # class rule: the data lacks escitalopram
    ("ibuprofen", "Rivaroxaban", ("interaction", "high")),  # class rule: anticoagulant with NSAID
    ("trimethoprim-sulfamethoxazole", "Methotrexate", ("interaction", "high")),  # class rule, unknown drug
    ("trimethoprim-sulfamethoxazole", "Warfarin", ("interaction", "high")),
    ("ciprofloxacin", "Ferrous sulfate", ("interaction", "moderate")),  # chelation
    ("lisinopril", "Aspirin", None),  # both in the data, no row: the data's judgement stands
    ("losartan", "Aspirin", None),  # low-dose aspirin is exempt from the ARB-NSAID class rule
    ("amlodipine", "Metformin", None),
])
def test_interactions(drug, med, expected, knowledge):
    report = check_prescription(drug, make_chart(meds=[med]), knowledge)
    found = {(f.kind, f.severity) for f in report.findings if f.kind == "interaction"}
    assert found == ({expected} if expected else set())


def test_every_active_medication_is_checked_in_calls_of_at_most_six_names(knowledge):
    meds = ["Lisinopril", "Furosemide", "Warfarin", "Metformin", "Amlodipine", "Atorvastatin", "Sertraline",
            "Omeprazole", "Digoxin", "Spironolactone", "Prednisone", "Levothyroxine"]
    fake = FakeKnowledge(
        safety={"ibuprofen": safety_of("ibuprofen")},
        generics={m.lower(): m.lower() for m in meds} | {"ibuprofen": "ibuprofen"},
        rows={("ibuprofen", "warfarin"): "major", ("ibuprofen", "spironolactone"): "moderate",
              ("ibuprofen", "prednisone"): "moderate"},
    )
    report = check_prescription("ibuprofen", make_chart(meds=meds), fake)
    calls = [args for name, args in fake.calls if name == "interactions"]
    assert all(2 <= len(c) <= 6 and c[0] == "ibuprofen" for c in calls)
    assert sorted(n for c in calls for n in c[1:]) == sorted(meds)
    texts = " ".join(f.text for f in report.findings if f.kind == "interaction")
    assert "Warfarin" in texts and "Spironolactone" in texts and "Prednisone" in texts
    assert report.checked["interactions"]


def test_only_active_medications_count(knowledge):
    meds = [{"medication_name": "Warfarin", "rxnorm_code": "11289", "status": "stopped"},
            {"medication_name": "Apixaban", "rxnorm_code": "1364430", "status": "on-hold"},
            {"medication_name": "Rivaroxaban", "rxnorm_code": "1114195", "status": "completed"},
            {"medication_name": "Clopidogrel", "rxnorm_code": "32968", "status": "active"}]
    report = check_prescription("aspirin", make_chart(meds=meds), knowledge)
    texts = [f.text for f in report.findings if f.kind == "interaction"]
    assert len(texts) == 1 and "Clopidogrel" in texts[0], texts


def test_medications_unknown_to_the_data_are_said_to_be_unchecked(knowledge):
    report = check_prescription("metformin", make_chart(meds=["Epinephrine auto-injector", "Rivastigmine"]), knowledge)
    info = [f for f in report.findings if f.kind == "not_checked"]
    assert info and info[0].severity == "info" and "Epinephrine auto-injector" in info[0].text
    assert not report.checked["interactions"] and not report.complete


# -- duplicates ------------------------------------------------------------------------------
@pytest.mark.parametrize("drug, med, expected", [
    ("metformin", "Metformin ER", ("duplicate", "high")),  # the same ingredient twice: a double dose
    ("Glucophage", "Metformin", ("duplicate", "high")),
    ("warfarin", "Warfarin", ("duplicate", "high")),  # same anticoagulant: high
    ("apixaban", "Rivaroxaban", ("duplicate", "high")),  # two anticoagulants
    ("clopidogrel", "Ticagrelor", ("duplicate", "high")),
    ("naproxen", "Ibuprofen", ("duplicate", "moderate")),
    ("ibuprofen", "Aspirin", None),  # low-dose aspirin with an NSAID: the interaction check's job
    ("losartan", "Lisinopril", ("duplicate", "moderate")),  # dual renin-angiotensin blockade
    ("simvastatin", "Atorvastatin", ("duplicate", "moderate")),
    ("sertraline", "Duloxetine", ("duplicate", "moderate")),
    ("albuterol", "Albuterol inhaler", ("duplicate", "high")),
    ("donepezil", "Donepezil", ("duplicate", "high")),  # unknown to the data: by ingredient name
    ("amlodipine", "Metoprolol", None),
])
def test_duplicates(drug, med, expected, knowledge):
    report = check_prescription(drug, make_chart(meds=[med]), knowledge)
    found = {(f.kind, f.severity) for f in report.findings if f.kind == "duplicate"}
    assert found == ({expected} if expected else set())


def test_duplicate_by_rxnorm_code_under_an_unusual_name(knowledge):
    med = {"medication_name": "GLU-500 tabs", "rxnorm_code": "6809", "status": "active"}
    report = check_prescription("metformin", make_chart(meds=[med]), knowledge)
    assert ("duplicate", "high") in codes(report)  # the same ingredient twice


# -- pregnancy -------------------------------------------------------------------------------
@pytest.mark.parametrize("problem, drug, expected", [
    (PREGNANT, "warfarin", "high"),
    (("Gravid uterus finding", "77386006"), "lisinopril", "high"),  # by code
    (("Pregnancy, second trimester", None), "methotrexate", "high"),  # by display
    (PREGNANT, "losartan", "high"),  # curated: ARBs, unknown to the data
    (PREGNANT, "atorvastatin", "moderate"),
    (PREGNANT, "ibuprofen", "moderate"),
    (PREGNANT, "amoxicillin", None),
    (PREGNANT, "metformin", None),
    (("Not pregnant", None), "warfarin", None),
    (("Essential hypertension", "59621000"), "lisinopril", None),
])
def test_pregnancy(problem, drug, expected, knowledge):
    report = check_prescription(drug, make_chart(30, problems=[problem]), knowledge)
    found = [f.severity for f in report.findings if f.kind == "pregnancy"]
    assert found == ([expected] if expected else [])


def test_pregnancy_from_the_drug_data_alone():
    fake = FakeKnowledge(safety={"novadrug": safety_of("novadrug", contraindications=["Pregnancy (fetal harm)"])})
    report = check_prescription("novadrug", make_chart(30, problems=[PREGNANT]), fake)
    finding = [f for f in report.findings if f.kind == "pregnancy"]
    assert finding and finding[0].severity == "high" and "local drug data" in finding[0].source


# -- renal -----------------------------------------------------------------------------------
EGFR = "33914-3"


@pytest.mark.parametrize("labs, problems, drug, expected", [
    ([(EGFR, "eGFR", 24)], [], "metformin", "high"),
    ([(EGFR, "eGFR", 42)], [], "metformin", "moderate"),
    ([(EGFR, "eGFR", 52)], [], "metformin", "low"),
    ([(EGFR, "eGFR", 75)], [], "metformin", None),
    ([("62238-1", "eGFR (CKD-EPI)", 25)], [], "ibuprofen", "high"),
    ([("98979-8", "eGFR CKD-EPI 2021", "<15")], [], "spironolactone", "high"),
    ([(EGFR, "eGFR", ">60")], [], "ibuprofen", None),
    ([], [("Chronic kidney disease stage 4", "431857002")], "metformin", "high"),
    ([], [CKD3], "metformin", "moderate"),
    ([], [("Chronic kidney disease", "709044004")], "ibuprofen", "moderate"),
    ([], [("End stage renal disease", None)], "apixaban", "moderate"),
    ([(EGFR, "eGFR", 24)], [], "aspirin", None),  # low-dose aspirin is exempt from the NSAID band
    ([(EGFR, "eGFR", 24)], [], "dofetilide", "moderate"),  # contraindicated only below clearance 20
    ([(EGFR, "eGFR", 18)], [], "dofetilide", "high"),
    ([(EGFR, "eGFR", 42)], [], "acetaminophen", None),  # the data speaks of severe impairment only
    ([(EGFR, "eGFR", 24)], [], "acetaminophen", "low"),
    ([(EGFR, "eGFR", 42)], [], "amlodipine", None),
])
def test_renal(labs, problems, drug, expected, knowledge):
    report = check_prescription(drug, make_chart(60, labs=labs, problems=problems), knowledge)
    found = [f.severity for f in report.findings if f.kind == "renal" and f.severity != "info"]
    assert found == ([expected] if expected else [])


def test_no_egfr_for_a_renally_cleared_drug_is_said(knowledge):
    report = check_prescription("metformin", make_chart(50), knowledge)
    assert [(f.kind, f.severity) for f in report.findings] == [("renal", "info")]


def test_renal_status_reads_the_latest_egfr_and_the_worst_stage():
    chart = make_chart(labs=[(EGFR, "eGFR", 50)], problems=[CKD3, ("Chronic kidney disease stage 4", "431857002")])
    chart["labs"].append({"display": "eGFR", "loinc_code": EGFR, "value": 38, "effective_at": "2026-10-20"})
    status = renal_status(chart)
    assert status.egfr == 38 and status.ckd_floor == 15 and status.impaired


# -- age -------------------------------------------------------------------------------------
@pytest.mark.parametrize("age, drug, expected", [
    (8, "lisinopril", "moderate"),  # paediatric dosing is not covered
    (11, "codeine", "high"), (12, "codeine", "moderate"), (11, "tramadol", "high"),
    (14, "aspirin", "high"), (15, "aspirin", "high"), (16, "aspirin", "moderate"),  # Reye's syndrome under 16
    (17, "ciprofloxacin", "moderate"),
    (18, "lisinopril", None),
    (70, "diphenhydramine", "moderate"), (64, "diphenhydramine", None),  # AGS Beers Criteria 2023
    (66, "ibuprofen", "moderate"), (66, "warfarin", "moderate"),
    (61, "ciprofloxacin", "low"), (59, "ciprofloxacin", None),  # the data: tendon risk over 60
    (70, "amlodipine", None),
])
def test_age(age, drug, expected, knowledge):
    report = check_prescription(drug, make_chart(age), knowledge)
    found = [f.severity for f in report.findings if f.kind == "age"]
    assert found == ([expected] if expected else [])


def test_unknown_age_is_not_checked(knowledge):
    report = check_prescription("lisinopril", make_chart(None), knowledge)
    assert not report.checked["age"] and not [f for f in report.findings if f.kind == "age"]
