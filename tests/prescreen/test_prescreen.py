"""Patient facts, the criterion evaluator and the whole prescreen, with a scripted model over
the real stores (the EHR demo record, the knowledge cache with the real sample imported)."""

from __future__ import annotations

from datetime import date

import pytest

from appliance.llm.fake import ScriptedModel
from appliance.prescreen.facts import MAX_BLOCK_CHARS, build_facts
from appliance.prescreen.judge import (
    MAX_CRITERION_CHARS,
    SYSTEM,
    evaluate_criterion,
    note_evidence,
)
from appliance.prescreen.run import (
    DISCLAIMER,
    PrescreenError,
    PrescreenPatientNotFound,
    render_text,
    run_prescreen,
)
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
    assert (j.verdict, j.exclusion_condition, j.cited, j.rejected_citations) == ("passes", None, ("D1",), ("Z9",))
    assert j.irrelevant_citations == ("P1",)  # the mesothelioma does not concern an age criterion
    (call,) = model.history
    assert call.node == INC and call.schema == "InclusionAnswer" and call.temperature == 0.0
    assert call.messages[0].content == SYSTEM  # the static prefix, the same on every call
    assert call.messages[1].content.startswith("Patient facts (cite their ids):\nD1 Age: 67 years")
    assert "Trial inclusion criterion: Age 18 or older" in call.messages[1].content


def test_an_exclusion_condition_present_means_the_patient_fails_it():
    model = ScriptedModel({EXC: [exc("yes"), exc("no", cited=("D2",)), exc("unknown", cited=())]})
    present = evaluate_criterion(model, FACTS, "Mesothelioma", "exclusion")
    absent = evaluate_criterion(model, FACTS, "Pregnancy", "exclusion")
    unknown = evaluate_criterion(model, FACTS, "Hepatitis B", "exclusion")
    assert (present.verdict, present.exclusion_condition) == ("fails", "present")
    assert (absent.verdict, absent.exclusion_condition) == ("passes", "absent")
    assert (unknown.verdict, unknown.exclusion_condition, unknown.note) == ("unknown", "unknown", None)
    assert model.history[0].schema == "ExclusionAnswer"


def test_a_judgement_citing_only_facts_that_do_not_concern_the_criterion_is_unknown():
    """The shipped model excluded a man for "Pregnancy or breastfeeding - no active allergies recorded"."""
    facts = build_facts({"patient": {"patient_id": "x-1", "age": 68, "sex": "male"}, "allergies": [],
                         "active_problems": [{"display": "Type 2 diabetes mellitus", "onset_date": "2011-04-18"}]})
    model = ScriptedModel({EXC: [exc("yes", cited=("A0",)), exc("yes", cited=("D1", "P1"))],
                           INC: [inc("no", cited=("A0", "P1"))]})
    pregnancy = evaluate_criterion(model, facts, "Pregnancy or breastfeeding", "exclusion")
    assert (pregnancy.verdict, pregnancy.exclusion_condition, pregnancy.cited) == ("unknown", "unknown", ())
    assert pregnancy.irrelevant_citations == ("A0",) and pregnancy.model_verdict == "fails"
    assert "A0 (Allergies: no active allergies recorded), which does not show that for this criterion" in pregnancy.note
    kept = evaluate_criterion(model, facts, "Uncontrolled diabetes", "exclusion")
    assert (kept.verdict, kept.cited, kept.irrelevant_citations) == ("fails", ("P1",), ("D1",))
    insulin = evaluate_criterion(model, facts, "Insulin-treated diabetes", "inclusion")
    assert insulin.verdict == "fails" and insulin.cited == ("P1",)


@pytest.mark.parametrize("kind, criterion, answer, cited, standing", [
    # "no allergies recorded" shows an absence: never an allergy that is present
    ("exclusion", "Known allergy to penicillin", "yes", "A0", "unknown"),
    ("exclusion", "Known allergy to penicillin", "no", "A0", "passes"),
    ("inclusion", "No known sensitivity to NSAIDs", "no", "A0", "unknown"),
    # a recorded allergy shows a presence, and only of what it is an allergy to
    ("exclusion", "Aspirin allergy or bleeding disorder", "yes", "A1", "unknown"),  # the allergy is to penicillin
    ("exclusion", "Known penicillin allergy", "yes", "A1", "fails"),
    ("exclusion", "Known penicillin allergy", "no", "A1", "unknown"),
    # the sex shows only that a criterion about the other sex does not apply
    ("exclusion", "Women who are breastfeeding or planning pregnancy", "yes", "D2", "unknown"),
    ("exclusion", "Women who are breastfeeding or planning pregnancy", "no", "D2", "passes"),
    ("inclusion", "Women of childbearing potential must use contraception", "no", "D2", "unknown"),
    ("inclusion", "Postmenopausal women with osteoporosis", "no", "D2", "fails"),
    # the age only what the criterion's own age bound says of it (the patient is 68)
    ("inclusion", "Any patient 18 to 99 year old with a diagnosis of pleural effusion", "no", "D1", "unknown"),
    ("inclusion", "Any patient 18 to 60 year old with a diagnosis of pleural effusion", "no", "D1", "fails"),
    ("inclusion", "Healthy volunteers matched for age (± 10 years) and gender", "no", "D1", "unknown"),
    # a problem shows a condition present only when it names that kind of condition (seen: "Kidney
    # transplant: yes [chronic kidney disease stage 3]" excluded John Smith)
    ("exclusion", "Kidney transplant", "yes", "P1", "unknown"),
    ("exclusion", "History of heart failure", "yes", "P2", "unknown"),
    ("exclusion", "Chronic kidney disease stage 4 or 5, or dialysis", "yes", "P1", "fails"),
    ("inclusion", "Chronic kidney disease", "yes", "P1", "passes"),
])
def test_a_cited_fact_supports_only_the_direction_it_points(kind, criterion, answer, cited, standing):
    facts = build_facts({"patient": {"patient_id": "x-1", "age": 68, "sex": "male"}, "allergies": [],
                         "active_problems": []})
    allergic = build_facts({"patient": {"patient_id": "x-2", "age": 68, "sex": "male"},
                            "allergies": [{"substance": "Penicillin", "reaction": "hives"}]})
    ill = build_facts({"patient": {"patient_id": "x-3", "age": 68, "sex": "male"}, "allergies": [],
                       "active_problems": [{"display": "Chronic kidney disease stage 3", "snomed_code": "433144002"},
                                           {"display": "Hypertensive heart disease", "snomed_code": "64715009"}]})
    reply = inc(answer, (cited,)) if kind == "inclusion" else exc(answer, (cited,))
    model = ScriptedModel({INC if kind == "inclusion" else EXC: [reply]})
    judged = evaluate_criterion(model, allergic if cited == "A1" else ill if cited.startswith("P") else facts,
                                criterion, kind)
    assert judged.verdict == standing, judged.note


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
def test_prescreen_of_a_demo_patient_ranks_and_explains(tools):
    """John Smith (abc-123, 68, man, type 2 diabetes since 2011, no insulin): the chart decides
    everything but "Kidney transplant", which the model judges."""
    model = ScriptedModel({EXC: [exc("no", ("P1",))]})  # NCT-DEMO-0004: kidney transplant
    result = run_prescreen(model, tools, "abc-123", max_trials=2, today=date(2026, 11, 26))
    out = result.to_json()
    assert [c["args"]["condition"] for c in out["search"]["calls"]] == [
        "Chronic kidney disease stage 3", "Hyperlipidemia", "Type 2 diabetes mellitus"]  # the problems, by code
    assert out["search"]["stop_reason"] == "enough candidates (2 for 2 trials)"
    assert set(out) >= {"patient_facts", "trials"} and out["patient_facts"]["patient_id"] == "abc-123"
    verdicts = {t["nct_id"]: t for t in out["trials"]}
    assert verdicts["NCT-DEMO-0004"]["verdict"] == "EXCLUDED"  # type 2 diabetes: the excluding condition is present
    assert verdicts["NCT-DEMO-0001"]["verdict"] == "NOT_ELIGIBLE"
    assert [t["nct_id"] for t in out["trials"]] == ["NCT-DEMO-0004", "NCT-DEMO-0001"]  # excluded before not eligible
    first = {c["criterion"]: c for c in verdicts["NCT-DEMO-0001"]["criteria"]}
    assert first["Age 30 Years to 75 Years"] == {
        "type": "inclusion", "criterion": "Age 30 Years to 75 Years", "verdict": "passes", "exclusion_condition": None,
        "cited_facts": ["D1"], "reason": first["Age 30 Years to 75 Years"]["reason"], "judged_by": "code",
        "decided_by": "code"}
    new_diagnosis = first["Type 2 diabetes diagnosed within the last 12 months"]
    assert (new_diagnosis["verdict"], new_diagnosis["decided_by"], new_diagnosis["cited_facts"]) == ("fails", "code", ["P3"])
    assert "since 2011-04-18: not diagnosed within the last 12 months" in new_diagnosis["reason"]
    insulin = first["Current insulin therapy"]
    assert (insulin["exclusion_condition"], insulin["decided_by"]) == ("absent", "code")
    assert insulin["reason"] == "No insulin among the active medication orders."
    assert first["Pregnancy or planning pregnancy"]["exclusion_condition"] == "absent"
    assert first["Pregnancy or planning pregnancy"]["cited_facts"] == ["D2"]
    excluded = [c for c in verdicts["NCT-DEMO-0004"]["criteria"] if c["exclusion_condition"] == "present"]
    assert excluded == [{"type": "exclusion", "criterion": "Type 1 or type 2 diabetes", "verdict": "fails",
                         "exclusion_condition": "present", "cited_facts": ["P3"],
                         "reason": "On the problem list: Type 2 diabetes mellitus since 2011-04-18.",
                         "judged_by": "code", "decided_by": "code"}]
    transplant = [c for c in verdicts["NCT-DEMO-0004"]["criteria"] if c["decided_by"] == "model"]
    assert [(c["criterion"], c["exclusion_condition"], c["cited_facts"]) for c in transplant] == [
        ("Kidney transplant", "absent", ["P1"])]
    assert out["stats"]["model_calls"] == 1 and out["stats"]["decided_by_model"] == 1
    assert out["stats"]["decided_by_code"] == out["stats"]["criteria_judged"] - 1 and out["stats"]["as_of"] == "2026-11-26"
    tools_used = [t for t, _ in tools.calls]
    assert tools_used[0] == "get_patient_chart" and tools_used.count("get_trial_details") == 2
    assert model.pending() == {} and [c.node for c in model.history] == [EXC]
    text = render_text(result)
    assert "Patient facts used:" in text and "P3 Problem: Type 2 diabetes mellitus" in text
    assert "1. EXCLUDED  NCT-DEMO-0004" in text
    # the verdicts come first, above the facts; the disclaimer once, last
    assert text.index("Verdicts:") < text.index("1. EXCLUDED  NCT-DEMO-0004") < text.index("Patient facts used:")
    assert text.count(DISCLAIMER) == 1 and text.rstrip().endswith(DISCLAIMER)
    assert DISCLAIMER not in render_text(result, disclaimer=False)


def test_uncertain_trials_list_their_questions(tools):
    """Charles Robinson (pat-017) on apixaban: code settles the anticoagulant, the model answers
    "unknown" to the rest, and each unknown criterion becomes a question."""
    model = ScriptedModel({INC: [inc("unknown", ()), inc("unknown", ())], EXC: [exc("unknown", ()), exc("unknown", ())]})
    result = run_prescreen(model, tools, "pat-017", condition="atrial fibrillation", max_trials=1, status="any",
                           today=date(2026, 11, 26))
    (trial,) = result.to_json()["trials"]
    assert trial["nct_id"] == "NCT-DEMO-0003" and trial["verdict"] == "UNCERTAIN" and trial["unknown_count"] == 4
    doac = next(c for c in trial["criteria"] if c["criterion"] == "Currently prescribed a direct oral anticoagulant")
    apixaban = next(f.id for f in result.facts.facts if f.text.startswith("Medication: Apixaban"))
    assert (doac["verdict"], doac["decided_by"], doac["cited_facts"]) == ("passes", "code", [apixaban])
    assert trial["questions"] == [
        "Does the patient meet the inclusion criterion 'Non-valvular atrial fibrillation'?",
        "Does the patient meet the inclusion criterion 'CHA2DS2-VASc score of 2 or more'?",
        "Is the exclusion condition 'Mechanical heart valve' present?",
        "Is the exclusion condition 'Life expectancy under 12 months' present?"]


def test_searches_are_said_in_clinical_words(tools):
    """A problem with no recruiting trial: "Asthma (from the problem list, ...): no matching trial", not
    "'Asthma' (code): not_found"."""
    model = ScriptedModel({PROPOSE_NODE: [{"action": "stop", "condition": None, "intervention": None,
                                           "eligibility_keywords": None}]})
    result = run_prescreen(model, tools, "pat-004", max_trials=1)
    text = render_text(result)
    assert "(code)" not in text and "not_found" not in text
    assert "Asthma (from the problem list, recruiting trials): no matching trial in the local cache" in text
    asked = run_prescreen(ScriptedModel({PROPOSE_NODE: [{"action": "stop", "condition": None, "intervention": None,
                                                         "eligibility_keywords": None}]}),
                          tools, "pat-004", condition="asthma", max_trials=1)
    assert "asthma (as asked, recruiting trials): no matching trial" in render_text(asked)


def test_unknown_and_malformed_patients_are_clear_errors(tools):
    with pytest.raises(PrescreenPatientNotFound, match="no patient with ID nobody-1"):
        run_prescreen(ScriptedModel(), tools, "nobody-1")
    with pytest.raises(PrescreenError, match="not a patient ID"):
        run_prescreen(ScriptedModel(), tools, "bad id!")
    with pytest.raises(PrescreenError, match="between 1 and 20"):
        run_prescreen(ScriptedModel(), tools, "abc-123", max_trials=0)
    assert [t for t, _ in tools.calls] == ["get_patient_chart"]


class HostLikeModel(ScriptedModel):
    """A scripted model with a clinic host's parallel slots: criterion calls come as batches."""

    slots = 3

    def __init__(self, replies):
        super().__init__(replies)
        self.batches: list[int] = []

    def generate_constrained_batch(self, jobs, *, parallel):
        from appliance.llm.batch import BatchResult
        from appliance.prescreen.judge import InclusionAnswer

        assert parallel <= self.slots
        self.batches.append(len(jobs))
        out = []
        for job in jobs:
            value = self.generate_constrained(INC if job.schema is InclusionAnswer else EXC, job.messages, job.schema,
                                              temperature=job.temperature, max_tokens=job.max_tokens)
            out.append(BatchResult("", value, None))
        return out


def test_on_a_host_the_criteria_the_model_judges_go_side_by_side_in_its_slots(tools):
    """Through a clinic host, with a model that has slots, the criteria code does not decide
    go to the model in groups of that many, in the
    trial's order, with the same judgements a single-call model gets."""
    replies = {INC: [inc("unknown", ()), inc("unknown", ())], EXC: [exc("unknown", ()), exc("unknown", ())]}
    said: list[str] = []
    host = HostLikeModel(replies)
    batched = run_prescreen(host, tools, "pat-017", condition="atrial fibrillation", max_trials=1, status="any",
                            today=date(2026, 11, 26), progress=said.append)
    single = run_prescreen(ScriptedModel(replies), tools, "pat-017", condition="atrial fibrillation", max_trials=1,
                           status="any", today=date(2026, 11, 26))
    assert host.batches == [3] and host.pending() == {}  # 4 criteria for the model: a group of 3, then one alone
    assert batched.to_json()["trials"] == single.to_json()["trials"]
    assert batched.to_json()["stats"]["model_calls"] == single.to_json()["stats"]["model_calls"]
    steps = [m.split(": ", 1)[1] for m in said if m.startswith("NCT-DEMO-0003: ")]
    assert steps[0].startswith("criteria ") and steps[1].startswith("criterion ")
