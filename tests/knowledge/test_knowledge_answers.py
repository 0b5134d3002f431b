"""Code's answers to knowledge look-ups (``appliance.agent.knowledge_answers``) on the real
server's results, in process through fastmcp on a database built from the shipped content:
every fact shown is the result's own, the source and its date are named, and what the local
data lacks is said plainly."""

from __future__ import annotations

from appliance.agent import knowledge_answers as answers
from mcp_servers.contracts import NOT_IN_DATABASE_CAVEATS
from tests.knowledge.knowledge_helpers import call


def test_a_safety_answer_holds_the_labels_warnings_and_names_its_source_and_date(server):
    result, error = call("check_drug_safety", {"drug_name": "Tikosyn"})
    assert error is None
    text = answers.safety(result, "Check FDA warnings for Tikosyn")
    assert text.startswith("Dofetilide (")
    assert f"Boxed warning: {result['boxed_warning']}" in text
    for item in result["contraindications"] + result["major_warnings"]:
        assert f"- {item}" in text
    assert f"Source: {result['source'].rstrip('. ')}" in text
    assert result["updated_at"][:10] in text or (result["label_date"] and result["label_date"][:4] in text)


def test_a_question_the_label_summary_cannot_answer_says_so(server):
    result, _ = call("check_drug_safety", {"drug_name": "metformin"})
    text = answers.safety(result, "what is metformin used for?")
    assert "not its indications or dosing" in text


def test_an_interaction_answer_gives_severity_effect_and_what_to_do(server):
    result, error = call("check_drug_interactions", {"drug_names": ["warfarin", "aspirin"]})
    assert error is None and result["interactions"]
    found = result["interactions"][0]
    text = answers.interactions(result, 33)
    assert f": {found['severity']}. Effect: {found['mechanism']}" in text
    assert f"What to do: {found['management']}" in text
    assert "Source: " in text and "no interaction recorded" not in text


def test_a_pair_the_data_does_not_hold_is_not_called_safe(server):
    result, error = call("check_drug_interactions", {"drug_names": ["omeprazole", "amlodipine"]})
    assert error is None and not result["interactions"] and not result["label_mentions"]
    text = answers.interactions(result, 33)
    assert "no interaction recorded in the local data for" in text
    assert "That is not the same as no interaction" in text


def test_a_drug_the_data_does_not_hold_is_said_plainly_with_how_to_add_labels(server):
    result, error = call("check_drug_interactions", {"drug_names": ["warfarin", "aspirin", "zorblatin"]})
    assert error is None and result["not_recognised"] == ["zorblatin"]
    text = answers.interactions(result, 263)
    assert ("zorblatin is not in this appliance's drug data (263 drugs; `appliance knowledge import openfda FILE` "
            f"adds FDA labels): no interaction information is available for it here "
            f"({NOT_IN_DATABASE_CAVEATS['check_drug_interactions']}).") in text
    _, error = call("check_drug_safety", {"drug_name": "zorblatin"})
    sentence = answers.unknown_drug_error("check_drug_safety", error[1], {"drug_name": "zorblatin"}, 263)
    assert sentence.startswith("zorblatin is not in this appliance's drug data (263 drugs;")
    assert NOT_IN_DATABASE_CAVEATS["check_drug_safety"] in sentence


def test_a_literature_answer_lists_title_year_and_pmid(server):
    result, error = call("search_medical_literature", {"query": "metformin lactic acidosis"})
    assert error is None and result["articles"]
    text = answers.literature(result)
    for article in result["articles"][:answers.MAX_ARTICLES]:
        assert article["title"] in text and f"PMID {article['pmid']}" in text and str(article["year"]) in text
    assert "Source: the appliance's local literature library" in text


def test_a_trial_answer_lists_nct_id_phase_status_and_conditions(server):
    result, error = call("find_clinical_trials", {"condition": "mesothelioma", "status": "any"})
    assert error is None and result["trials"]
    text = answers.trials(result)
    for trial in result["trials"][:answers.MAX_TRIALS]:
        assert f"- {trial['nct_id']}: {trial['title']}" in text
        assert (trial["phase"] or "phase not stated") in text and (trial["status"] or "status not stated") in text
    assert "ClinicalTrials.gov" in text


def test_trial_details_give_the_criteria_as_the_record_splits_them(server):
    found, _ = call("find_clinical_trials", {"condition": "diabetes", "status": "any"})
    nct = found["trials"][0]["nct_id"]
    result, error = call("get_trial_details", {"nct_id": nct})
    assert error is None
    text = answers.trial_details(result)
    assert nct in text
    for criterion in result["inclusion_criteria"][:12]:
        assert f"- {criterion}" in text
