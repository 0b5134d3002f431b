"""Criteria the chart decides, decided by code: a table over the real demo charts (the shipped
ehr_db/demo/patients.json loaded into a real SQLite record), read as of the demo's own date.

Each row: patient, criterion type and text, then the expected standing (``None``: code leaves
the criterion to the model), the facts it must cite (by what they say, so a reordered chart
cannot hide a wrong citation), and words the reason must hold."""

from __future__ import annotations

from datetime import date

import pytest

from appliance.prescreen.decide import decide_criterion, decide_note, normalise
from appliance.prescreen.facts import build_facts
from appliance.prescreen.subject import from_note

AS_OF = date(2026, 11, 1)  # the demo file's "as_of"


@pytest.fixture(scope="module")
def charts(tmp_path_factory):
    from ehr_db.repository import EhrRepository
    from ehr_db.setup import ensure_database

    path = tmp_path_factory.mktemp("ehr") / "ehr.sqlite"
    ensure_database(path)
    repo = EhrRepository(path)
    return lambda pid: build_facts(repo.get_patient_chart(pid, AS_OF))


def cited_as(facts, fact_id: str) -> str:
    return next(f.text for f in facts.facts if f.id == fact_id)


TABLE = [
    # -- age ("aged 40-75" and ">= 18 years"; John Smith is 68, Sophia Martinez 8, Charles Robinson 88)
    ("abc-123", "inclusion", ">= 18 years", "passes", ["Age: 68"], "68 years old"),
    ("abc-123", "inclusion", "aged 40-75", "passes", ["Age: 68"], "68 years old"),
    ("pat-017", "inclusion", "aged 40-75", "fails", ["Age: 88"], "88 years old"),
    ("pat-007", "inclusion", ">= 18 years", "fails", ["Age: 8"], "8 years old"),
    ("pat-022", "exclusion", "Less than 18 years of age", "fails", ["Age: 12"], "12 years old"),
    ("abc-123", "inclusion", "Age 68 years or younger", "passes", ["Age: 68"], ""),  # every 68-year-old
    ("abc-123", "inclusion", "Age under 68", "fails", ["Age: 68"], ""),
    # -- sex
    ("pat-006", "inclusion", "Women", "passes", ["Sex: female"], "female"),
    ("abc-123", "inclusion", "women", "fails", ["Sex: male"], "male"),
    ("abc-123", "inclusion", "Male", "passes", ["Sex: male"], ""),
    ("abc-123", "inclusion", "Men and women aged 18 to 75 years", "passes", ["Sex: male", "Age: 68"], ""),
    # -- pregnancy and breastfeeding: absent for a man, from the problem list for a woman
    ("abc-123", "exclusion", "Pregnancy or breastfeeding", "passes", ["Sex: male"], "male"),
    ("pat-008", "exclusion", "Pregnancy or breastfeeding", "fails", ["Problem: Pregnancy"], "on the problem list"),
    ("pat-008", "exclusion", "Pregnancy or planning pregnancy", "fails", ["Problem: Pregnancy"], ""),
    ("pat-006", "exclusion", "Pregnancy or breastfeeding", "passes", ["Sex: female", "Problem: Anxiety"],
     "not on the problem list"),
    ("pat-006", "exclusion", "Pregnancy or planning pregnancy", "unknown", [], "planned pregnancy"),
    ("abc-123", "inclusion", "Singleton pregnancy at 11 to 14 weeks of gestation", "fails", ["Sex: male"], "male"),
    ("pat-008", "inclusion", "Singleton pregnancy at 11 to 14 weeks of gestation", None, [], ""),
    # -- labs with units and dates (John Smith's HbA1c 7.9 % on 2026-09-15; Michael Brown's 6.1 % on 2026-05-05)
    ("abc-123", "inclusion", "HbA1c < 7% within 3 months", "fails", ["Lab Hemoglobin A1c: 7.9"], "below 7"),
    ("pat-011", "inclusion", "HbA1c < 7% within 3 months", "unknown", ["Lab Hemoglobin A1c: 6.1"], "older than 3 months"),
    ("pat-011", "inclusion", "HbA1c < 7% within 6 months", "passes", ["Lab Hemoglobin A1c: 6.1"], ""),
    ("abc-123", "inclusion", "HbA1c below 53 mmol/mol", "unknown", ["Lab Hemoglobin A1c: 7.9"], "another unit"),
    ("abc-123", "inclusion", "eGFR >= 30 mL/min/1.73m2", "passes", ["Lab eGFR: 42"], "30 or higher"),
    ("pat-015", "inclusion", "eGFR >= 30 mL/min/1.73m2", "fails", ["Lab eGFR: 24"], ""),
    ("pat-015", "exclusion", "eGFR below 30 mL/min/1.73 m2", "fails", ["Lab eGFR: 24"], ""),
    ("abc-123", "inclusion", "eGFR 30 to 59 mL/min/1.73 m2 for at least 3 months", "passes", ["Lab eGFR: 42"],
     "46 on 2026-03-12"),
    ("pat-006", "inclusion", "eGFR >= 30 mL/min/1.73m2", "unknown", [], "No eGFR result"),
    # -- coded conditions with onset dates
    ("abc-123", "inclusion", "Type 2 diabetes diagnosed within the last 12 months", "fails",
     ["Problem: Type 2 diabetes mellitus"], "since 2011-04-18: not diagnosed within the last 12 months"),
    ("pat-020", "inclusion", "Anemia diagnosed within the last 12 months", "passes", ["Problem: Anemia"], "2026-01-28"),
    ("pat-015", "inclusion", "Anemia diagnosed within the last 12 months", "fails", ["Problem: Anemia"], "2025-03-18"),
    ("pat-004", "inclusion", "Physician-diagnosed asthma for at least 6 months", "passes", ["Problem: Asthma"], ""),
    ("abc-123", "exclusion", "Type 1 or type 2 diabetes", "fails", ["Problem: Type 2 diabetes mellitus"], ""),
    ("pat-013", "exclusion", "Type 1 or type 2 diabetes", "fails", ["Problem: Type 1 diabetes mellitus"], ""),
    ("pat-006", "exclusion", "Type 1 or type 2 diabetes", "passes", ["Problem: Anxiety"], "not on the active problem list"),
    ("abc-123", "exclusion", "History of hypertension", "fails", ["Problem: Hypertensive disorder"], ""),
    # an active-only list cannot rule out a past episode; pat-009's resolved myocardial infarction is the case
    ("abc-123", "exclusion", "History of lactic acidosis or metabolic acidosis", "unknown", [], "active problems only"),
    ("pat-009", "exclusion", "History of myocardial infarction", "unknown", [], "active problems only"),
    ("abc-123", "exclusion", "Bipolar disorder or psychosis", "passes", ["Problem: Chronic kidney disease"],
     "Bipolar disorder: not on the active problem list"),
    # -- current therapy from active medication orders (insulin glargine and lispro count)
    ("abc-123", "exclusion", "Current insulin therapy", "passes", ["Medication: Metformin"],
     "No insulin among the active medication orders"),
    ("pat-013", "exclusion", "Current insulin therapy", "fails",
     ["Medication: Insulin glargine", "Medication: Insulin lispro"], ""),
    ("pat-015", "exclusion", "Current insulin therapy", "fails", ["Medication: Insulin glargine"], ""),
    ("pat-015", "exclusion", "Current metformin therapy", "passes", [], ""),  # the stopped order is not current
    ("pat-017", "inclusion", "Currently prescribed a direct oral anticoagulant", "passes", ["Medication: Apixaban"], ""),
    ("pat-005", "inclusion", "Currently prescribed a direct oral anticoagulant", "fails", [], ""),
    ("pat-005", "exclusion", "Current anticoagulant therapy", "fails", ["Medication: Warfarin"], ""),
    ("abc-123", "inclusion", "Stable ACE inhibitor or ARB dose for 4 weeks", "passes", ["Medication: Lisinopril"], ""),
    # -- left to the model: words code does not read
    ("abc-123", "exclusion", "Secondary hypertension", None, [], ""),
    ("abc-123", "exclusion", "Kidney transplant", None, [], ""),
    ("pat-013", "exclusion", "Prior insulin therapy", None, [], ""),
    ("pat-006", "exclusion", "Women of childbearing potential not using contraception", None, [], ""),
    ("abc-123", "inclusion", "Patients aged 18-90 presenting with dysphagia or food impaction", None, [], ""),
]


@pytest.mark.parametrize("pid, kind, criterion, standing, cites, words", TABLE,
                         ids=[f"{r[0]}:{r[2][:40]}" for r in TABLE])
def test_code_decides_what_the_chart_decides(charts, pid, kind, criterion, standing, cites, words):
    facts = charts(pid)
    judged = decide_criterion(facts, criterion, kind, AS_OF)
    if standing is None:
        assert judged is None, f"code decided {judged}"
        return
    assert judged is not None and judged.judged_by == "code"
    assert judged.verdict == standing, judged.reason
    if kind == "exclusion":
        assert judged.exclusion_condition == {"fails": "present", "passes": "absent", "unknown": "unknown"}[standing]
    cited = [cited_as(facts, i) for i in judged.cited]
    for text in cites:
        assert any(c.startswith(text) for c in cited), (text, cited)
    if standing != "unknown":
        assert judged.cited, "a decision cites the facts it rests on"
    assert words in judged.reason
    assert "(code)" not in judged.reason and "not_found" not in judged.reason


def test_absence_counts_only_where_the_list_was_read_whole():
    listed = {"patient": {"patient_id": "x-1", "age": 50, "sex": "female"}, "active_problems": [], "medications": []}
    read = build_facts(listed)
    assert decide_criterion(read, "Asthma", "exclusion", AS_OF).exclusion_condition == "absent"
    assert decide_criterion(read, "Current insulin therapy", "exclusion", AS_OF).cited == ("M0",)
    unread = build_facts({"patient": {"patient_id": "x-1", "age": 50, "sex": "female"}})  # no lists in the chart
    assert decide_criterion(unread, "Asthma", "exclusion", AS_OF).exclusion_condition == "unknown"
    assert decide_criterion(unread, "Current insulin therapy", "exclusion", AS_OF).verdict == "unknown"
    assert decide_criterion(unread, "Pregnancy", "exclusion", AS_OF).verdict == "unknown"
    crowded = dict(listed, active_problems=[{"display": f"Problem number {i} " + "x" * 150, "onset_date": f"20{i:02d}-01-01"}
                                            for i in range(40)])
    trimmed = build_facts(crowded)
    assert "problem" not in trimmed.complete and any("problems" in t for t in trimmed.trimmed)
    assert decide_criterion(trimmed, "Asthma", "exclusion", AS_OF).verdict == "unknown"


def test_a_result_without_a_date_or_with_a_stale_date_decides_nothing():
    chart = {"patient": {"patient_id": "x-1", "age": 50, "sex": "male"}, "labs": [
        {"display": "eGFR", "loinc_code": "33914-3", "value": 20, "unit": "mL/min/1.73m2", "effective_at": "2024-01-01"},
        {"display": "Hemoglobin A1c", "loinc_code": "4548-4", "value": 9, "unit": "%", "effective_at": None}]}
    facts = build_facts(chart)
    stale = decide_criterion(facts, "eGFR below 30 mL/min/1.73 m2", "exclusion", AS_OF)
    assert stale.verdict == "unknown" and "older than a year" in stale.reason
    assert decide_criterion(facts, "HbA1c 6.5% to 9.0%", "inclusion", AS_OF).verdict == "unknown"


@pytest.mark.parametrize("note, criterion, kind, standing", [
    ("0. A 58-year-old African-American woman presents to the ER.", "Age ≥18 years", "inclusion", "passes"),
    ("0. A 58-year-old African-American woman presents to the ER.", "Male", "inclusion", "fails"),
    ("0. A 2-year-old boy is brought in by his parents.", "Male Age 2 months to 20 years of age", "inclusion", "passes"),
    ("0. A 10-month-old infant girl.\n1. She has a rash.", "Age 18+", "inclusion", "fails"),
    ("0. A 51-year-old woman is seen in clinic.", "Postmenopausal female, 55-75 years old", "inclusion", "fails"),
    ("0. A 51-year-old woman is seen in clinic.", "Postmenopausal women", "exclusion", None),
    ("0. A 32-year-old male with diarrhea.", "Pregnant or lactating women", "exclusion", None),  # not read from notes
    ("0. The patient presents with cough.\n1. No other history.", "Age ≥18 years", "inclusion", "unknown"),
])
def test_a_note_settles_what_its_age_and_sex_settle(note, criterion, kind, standing):
    judged = decide_note(from_note(note), criterion, kind)
    assert (judged.verdict if judged else None) == standing
    if judged and standing != "unknown":
        assert judged.cited == ("0",)


def test_criteria_are_read_after_symbols_and_numbering_are_normalised():
    assert normalise("22. Women who are breast feeding.") == "women who are breast feeding"
    assert normalise("eGFR ≥ 30 mL/min/1.73 m²") == "egfr >= 30 ml/min/1.73m2"
