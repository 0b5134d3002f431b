"""Patient facts, the criterion evaluator and the whole prescreen, with a scripted model over
the real stores (the EHR demo record, the knowledge cache with the real sample imported)."""

from __future__ import annotations

import pytest

from appliance.llm.fake import ScriptedModel
from appliance.prescreen.evaluate import MAX_CRITERION_CHARS, SYSTEM, evaluate_criterion, note_evidence
from appliance.prescreen.facts import MAX_BLOCK_CHARS, build_facts
from appliance.prescreen.run import PrescreenError, PrescreenPatientNotFound, render_text, run_prescreen
from appliance.prescreen.search import PROPOSE_NODE

INC, EXC = "CRITERION_INCLUSION", "CRITERION_EXCLUSION"


def inc(answer: str, cited=("D1",), reason="From the chart.") -> dict:
    return {"meets_criterion": answer, "cited_facts": list(cited), "reason": reason}


def exc(answer: str, cited=("P1",), reason="From the chart.") -> dict:
    return {"excluding_condition_present": answer, "cited_facts": list(cited), "reason": reason}


# -- facts ------------------------------------------------------------------------------------
def test_facts_have_ids_dates_sources_and_name_empty_categories(tools):
    chart = tools.call("get_patient_chart", {"patient_id": "abc-123"}, 10).result
    facts = build_facts(chart)
    by_id = {f.id: f for f in facts.facts}
    assert by_id["D1"].text.startswith(f"Age: {chart['patient']['age']} years") and by_id["D2"].text == "Sex: male"
    assert by_id["P3"].text.startswith("Problem: Type 2 diabetes mellitus (SNOMED 44054006)")
    assert by_id["M1"].source == chart["medications"][0]["id"]  # the order's own row id
    assert by_id["L1"].date == chart["labs"][0]["effective_at"][:10]
    assert facts.problems[0] == "Chronic kidney disease stage 3" and facts.trimmed == ()
    bare = build_facts({"patient": {"patient_id": "x-1", "age": 40, "sex": "female"}})
    assert [f.line() for f in bare.facts if f.id.endswith("0")] == [
        "P0 Problems: no active problems recorded", "M0 Medications: no active medications recorded",
        "A0 Allergies: no active allergies recorded", "L0 Labs: no results recorded", "V0 Vitals: none recorded"]


def test_facts_are_trimmed_by_rule_and_never_silently():
    labs = [{"display": f"Analyte {i}", "value": i, "unit": "mg/dL", "effective_at": f"20{10 + i // 12:02d}-{i % 12 + 1:02d}-01"}
            for i in range(120)]
    chart = {"patient": {"patient_id": "x-1", "age": 50, "sex": "male"},
             "active_problems": [{"display": "Asthma", "onset_date": "2001-01-01"}],
             "allergies": [{"substance": "Penicillin", "reaction": "r" * 400}], "labs": labs}
    facts = build_facts(chart)
    assert len(facts.text()) <= MAX_BLOCK_CHARS
    kept = [f for f in facts.facts if f.kind == "lab"]
    assert kept and min(f.date for f in kept) > "2010-06-01"  # the oldest were left out first
    assert {"D1", "D2", "P1", "A1"} <= facts.ids()  # demographics, problems and allergies stay
    assert facts.trimmed[0] == "shortened to 220 characters: A1" and "[shortened]" in {f.id: f for f in facts.facts}["A1"].text
    assert "left out to fit the model's context (labs, oldest first): L1 (2010-01-01)" in facts.trimmed[1]


# -- one criterion ----------------------------------------------------------------------------
FACTS = build_facts({"patient": {"patient_id": "x-1", "age": 67, "sex": "male"},
                     "active_problems": [{"display": "Malignant pleural mesothelioma", "onset_date": "2024-02-01"}]})


def test_an_inclusion_answer_is_the_patients_standing_with_checked_citations():
    model = ScriptedModel({INC: [inc("yes", cited=("d1", "P1", "Z9", "P1"))]})
    j = evaluate_criterion(model, FACTS, "Age 18 or older", "inclusion")
    assert (j.verdict, j.exclusion_condition, j.cited, j.rejected_citations) == ("passes", None, ("D1", "P1"), ("Z9",))
    (call,) = model.history
    assert call.node == INC and call.schema == "InclusionAnswer" and call.temperature == 0.0
    assert call.messages[0].content == SYSTEM  # the static prefix, the same on every call
    assert call.messages[1].content.startswith("Patient facts (cite their ids):\nD1 Age: 67 years")
    assert "Trial inclusion criterion: Age 18 or older" in call.messages[1].content


def test_an_exclusion_condition_present_means_the_patient_fails_it():
    model = ScriptedModel({EXC: [exc("yes"), exc("no"), exc("unknown", cited=())]})
    present = evaluate_criterion(model, FACTS, "Mesothelioma", "exclusion")
    absent = evaluate_criterion(model, FACTS, "Pregnancy", "exclusion")
    unknown = evaluate_criterion(model, FACTS, "Hepatitis B", "exclusion")
    assert (present.verdict, present.exclusion_condition) == ("fails", "present")
    assert (absent.verdict, absent.exclusion_condition) == ("passes", "absent")
    assert (unknown.verdict, unknown.exclusion_condition, unknown.note) == ("unknown", "unknown", None)
    assert model.history[0].schema == "ExclusionAnswer"


def test_a_decided_answer_without_an_existing_citation_counts_as_unknown():
    model = ScriptedModel({INC: [inc("no", cited=("X7",)), inc("no", cited=())]})
    j = evaluate_criterion(model, FACTS, "ECOG 0-1", "inclusion")
    assert j.verdict == "unknown" and j.rejected_citations == ("X7",) and "without citing a fact" in j.note
    loose = evaluate_criterion(model, FACTS, "ECOG 0-1", "inclusion", require_citation=False)
    assert loose.verdict == "fails"  # the benchmark may judge a note without citations


def test_long_criteria_are_shortened_and_say_so_and_notes_are_cited_by_sentence():
    model = ScriptedModel({INC: [inc("yes", cited=("1",)), inc("unknown", cited=())]})
    note = "0. A 61-year-old man has dyspnea.\n1. Biopsy shows epithelioid mesothelioma.\n2. He smokes."
    j = evaluate_criterion(model, note, "Histologically confirmed mesothelioma", "inclusion")
    assert j.verdict == "passes" and j.cited == ("1",)
    assert "Patient note (cite sentence numbers)" in model.history[0].messages[1].content
    long = evaluate_criterion(model, FACTS, "word " * 400, "inclusion")
    assert len(long.criterion) <= MAX_CRITERION_CHARS + 4 and "shortened to 1000 characters" in long.note
    assert note_evidence("He is 61. He has cough! Any fever? No.").ids == frozenset({"0", "1", "2", "3"})


def test_bad_criterion_type_is_refused():
    with pytest.raises(ValueError):
        evaluate_criterion(ScriptedModel(), FACTS, "x", "maybe")


# -- the whole prescreen ----------------------------------------------------------------------
def script_for_demo() -> ScriptedModel:
    """Answers for NCT-DEMO-0004 then NCT-DEMO-0001 (the order the search ranks them)."""
    return ScriptedModel({
        INC: [inc("yes", ("L4",)), inc("yes", ("L9",)), inc("yes", ("M3",)),  # 0004: eGFR, UACR, ACE inhibitor
              inc("no", ("P3",)), inc("yes", ("L1",)), inc("unknown", ())],  # 0001: new diagnosis, HbA1c, eGFR
        EXC: [exc("yes", ("P3",)), exc("no", ("P1",)), exc("no", ("D2",)),  # 0004: diabetes present
              exc("no", ("M1",)), exc("no", ("D2",)), exc("unknown", ())],
    })


def test_prescreen_of_a_demo_patient_ranks_and_explains(tools):
    model = script_for_demo()
    result = run_prescreen(model, tools, "abc-123", max_trials=2)
    out = result.to_json()
    assert [c["args"]["condition"] for c in out["search"]["calls"]] == [
        "Chronic kidney disease stage 3", "Hyperlipidemia", "Type 2 diabetes mellitus"]  # the problems, by code
    assert out["search"]["stop_reason"] == "enough candidates (2 for 2 trials)"
    assert set(out) >= {"patient_facts", "trials"} and out["patient_facts"]["patient_id"] == "abc-123"
    verdicts = {t["nct_id"]: t for t in out["trials"]}
    assert verdicts["NCT-DEMO-0004"]["verdict"] == "EXCLUDED"  # type 2 diabetes: the excluding condition is present
    assert verdicts["NCT-DEMO-0001"]["verdict"] == "NOT_ELIGIBLE"
    assert [t["nct_id"] for t in out["trials"]] == ["NCT-DEMO-0004", "NCT-DEMO-0001"]  # excluded before not eligible
    first = verdicts["NCT-DEMO-0001"]["criteria"]
    assert first[0] == {"type": "inclusion", "criterion": "Age 30 Years to 75 Years", "verdict": "passes",
                        "exclusion_condition": None, "cited_facts": ["D1"], "reason": first[0]["reason"],
                        "judged_by": "code"}
    excluded = [c for c in verdicts["NCT-DEMO-0004"]["criteria"] if c["exclusion_condition"] == "present"]
    assert excluded == [{"type": "exclusion", "criterion": "Type 1 or type 2 diabetes", "verdict": "fails",
                         "exclusion_condition": "present", "cited_facts": ["P3"], "reason": "From the chart.",
                         "judged_by": "model"}]
    tools_used = [t for t, _ in tools.calls]
    assert tools_used[0] == "get_patient_chart" and tools_used.count("get_trial_details") == 2
    assert model.pending() == {}
    text = render_text(result)
    assert "Patient facts used:" in text and "P3 Problem: Type 2 diabetes mellitus" in text
    assert "1. EXCLUDED  NCT-DEMO-0004" in text


def test_uncertain_trials_list_their_questions(tools):
    model = ScriptedModel({INC: [inc("yes", ("L4",)), inc("unknown", ()), inc("yes", ("M3",))],
                           EXC: [exc("no", ("P1",)), exc("no", ("P1",)), exc("unknown", ())]})
    result = run_prescreen(model, tools, "abc-123", condition="chronic kidney disease", max_trials=1)
    (trial,) = result.to_json()["trials"]
    assert trial["verdict"] == "UNCERTAIN" and trial["unknown_count"] == 2
    assert trial["questions"] == [
        "Does the patient meet the inclusion criterion 'Urine albumin-to-creatinine ratio 30 mg/g or higher'?",
        "Is the exclusion condition 'Pregnancy or breastfeeding' present?"]


def test_unknown_and_malformed_patients_are_clear_errors(tools):
    with pytest.raises(PrescreenPatientNotFound, match="no patient with ID nobody-1"):
        run_prescreen(ScriptedModel(), tools, "nobody-1")
    with pytest.raises(PrescreenError, match="not a patient ID"):
        run_prescreen(ScriptedModel(), tools, "bad id!")
    with pytest.raises(PrescreenError, match="between 1 and 20"):
        run_prescreen(ScriptedModel(), tools, "abc-123", max_trials=0)
    assert [t for t, _ in tools.calls] == ["get_patient_chart"]
