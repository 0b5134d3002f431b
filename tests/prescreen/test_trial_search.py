"""find_clinical_trials' parameters with ClinicalTrials.gov's meaning, and get_trial_details'
criteria split by code, on the real sample records imported through the v2 importer."""

from __future__ import annotations

import pytest

from mcp_servers.knowledge.trials import STATUS_GROUPS
from tests.knowledge.knowledge_helpers import call

NULLS = {"intervention": None, "eligibility_keywords": None, "status": None, "phase": None, "sex": None,
         "patient_age": None, "study_type": None, "page_size": None}


def search(**args):
    return call("find_clinical_trials", {**NULLS, **args})


def ids(result) -> set[str]:
    return {t["nct_id"] for t in result["trials"]}


def test_status_defaults_to_recruiting_and_any_drops_the_filter(sample_db):
    default, _ = search(condition="pleural effusion", page_size="50")
    assert default["filters"]["status"] == "recruiting"
    assert default["trials"] and all(t["status"] in STATUS_GROUPS["recruiting"] for t in default["trials"])
    every, _ = search(condition="pleural effusion", status="any", page_size="50")
    assert {t["status"] for t in every["trials"]} >= {"COMPLETED", "RECRUITING"}
    assert ids(default) < ids(every)
    completed, _ = search(condition="pleural effusion", status="completed", page_size="50")
    assert completed["trials"] and {t["status"] for t in completed["trials"]} == {"COMPLETED"}


def test_phase_keeps_trials_whose_phases_include_it(sample_db):
    phase1, _ = search(condition="mesothelioma", status="any", phase="phase1", page_size="50")
    assert phase1["trials"] and all("Phase 1" in t["phase"] for t in phase1["trials"])
    assert any(t["phase"] == "Phase 1/Phase 2" for t in phase1["trials"])  # a Phase 1/2 trial is phase 1 too
    phase2, _ = search(condition="mesothelioma", status="any", phase="phase2", page_size="50")
    assert ids(phase1) & ids(phase2)  # the combined-phase trials are in both
    assert not any(t["phase"] == "Phase 1" for t in phase2["trials"])


# Words of each trial's own title, so a search finds that trial alone, whatever the page size.
TITLE_WORDS = {
    "NCT00042770": "chest tube small catheter",  # 18 Years and older
    "NCT01424176": "dexpramipexole",  # 18 to 75 Years
    "NCT02208895": "iSTAT comparison",  # 18 to 99 Years
    "NCT04236037": "ultrasound-guided biopsy pleura",  # 6 Months to 17 Years
    "NCT04235998": "upfront systematic lung ultrasound",  # FEMALE only (assigned)
    "NCT02300883": "biological characteristics mesothelioma",  # no ages, no sex in the record
}


def found(nct: str, **filters) -> bool:
    result, error = search(condition=TITLE_WORDS[nct], status="any", **filters)
    assert error is None or error[0] == "not_found", error
    return result is not None and nct in ids(result)


@pytest.mark.parametrize("nct, age, expected", [
    ("NCT00042770", "18", True), ("NCT00042770", "17", False), ("NCT00042770", "100", True),
    ("NCT01424176", "18", True), ("NCT01424176", "75", True), ("NCT01424176", "76", False),
    ("NCT01424176", "17", False),
    ("NCT02208895", "99", True), ("NCT02208895", "100", False),
    ("NCT04236037", "0", True), ("NCT04236037", "17", True), ("NCT04236037", "18", False),  # 6 Months to 17 Years
    ("NCT02300883", "0", True), ("NCT02300883", "120", True),  # no ages given: no limit
])
def test_patient_age_against_each_trials_minimum_and_maximum(sample_db, nct, age, expected):
    assert found(nct) is True
    assert found(nct, patient_age=age) is expected


@pytest.mark.parametrize("nct, sex, expected", [
    ("NCT04235998", "female", True), ("NCT04235998", "male", False),
    ("NCT00042770", "female", True), ("NCT00042770", "male", True),  # ALL
    ("NCT02300883", "male", True),  # the record does not say: not filtered out
])
def test_sex_keeps_trials_open_to_the_patients_sex(sample_db, nct, sex, expected):
    assert found(nct, sex=sex) is expected


def test_intervention_and_eligibility_keywords(sample_db):
    talc, _ = search(condition="pleural effusion", intervention="talc", status="any", page_size="50")
    assert talc["trials"] and all(any("talc" in i.lower() for i in t["interventions"]) for t in talc["trials"])
    danish, _ = search(condition="pleural effusion", eligibility_keywords="Danish", status="any")
    assert ids(danish) == {"NCT04235998", "NCT03272087"}  # NCT04236037 says Danish, but not "effusion"
    assert found("NCT04236037", eligibility_keywords="Danish")
    assert not found("NCT04236037", eligibility_keywords="Danish chemotherapy")  # every word must occur


def test_study_type_and_page_size_cap(sample_db):
    observational, _ = search(condition="pleural", status="any", study_type="observational", page_size="50")
    assert observational["trials"] and {t["study_type"] for t in observational["trials"]} == {"OBSERVATIONAL"}
    _, error = search(condition="pleural", status="any", page_size="1000")
    assert error[0] == "invalid_args"  # more than three digits is refused by the contract
    capped, _ = search(condition="pleural", status="any", page_size="999")
    assert capped["filters"]["page_size"] == 50 and capped["count"] <= 50
    assert capped["total_matches"] >= capped["count"]


def test_nothing_found_says_which_filters_were_applied(sample_db):
    _, error = search(condition="mesothelioma", sex="female", patient_age="5", phase="phase4")
    assert error[0] == "not_found"
    assert "status recruiting" in error[1] and "phase phase4" in error[1] and "patient age 5" in error[1]
    assert "match the condition words without these filters" in error[1]


@pytest.mark.parametrize("field, value", [("patient_age", "sixty"), ("patient_age", "6.5"), ("page_size", "-1"),
                                          ("phase", "phase9"), ("sex", "other"), ("status", "open")])
def test_bad_filter_values_are_invalid_args(sample_db, field, value):
    _, error = search(condition="mesothelioma", **{field: value})
    assert error[0] == "invalid_args" and field in error[1]


def test_trial_details_split_the_eligibility_text_by_code(sample_db):
    details, error = call("get_trial_details", {"nct_id": "NCT03272087"})
    assert error is None
    assert details["inclusion_criteria"][0].startswith("Patients with recurrent pleural effusion")
    assert len(details["inclusion_criteria"]) == 5 and len(details["exclusion_criteria"]) == 5
    assert details["exclusion_criteria"][0] == "Female patients: pregnancy or breastfeeding."
    assert details["minimum_age"] == "18 Years" and details["ages"] == "18 Years and older"
    older, _ = call("get_trial_details", {"nct_id": "NCT00042770"})  # no section headings: all inclusion
    assert older["exclusion_criteria"] == [] and "Age: 18 and over" in older["inclusion_criteria"]
    demo, _ = call("get_trial_details", {"nct_id": "NCT-DEMO-0001"})
    assert demo["eligibility_notes"] == ["DEMO RECORD - not a real study."]
    assert demo["exclusion_criteria"] == ["Current insulin therapy", "Pregnancy or planning pregnancy",
                                          "History of lactic acidosis or metabolic acidosis"]
