"""Every tool of the knowledge server, in memory through a real fastmcp Client and real SQLite."""

from __future__ import annotations

import asyncio

import pytest
from fastmcp import Client

from mcp_servers.knowledge import server as knowledge
from tests.knowledge.knowledge_helpers import call

# The agent tools' input schemas are their records' (tests/test_contracts.py).


def _tools() -> dict:
    async def run():
        async with Client(knowledge.mcp) as client:
            return await client.list_tools()

    return {t.name: t for t in asyncio.run(run())}


def test_find_trials_status_may_be_omitted_by_generic_clients(server):
    async def run():
        async with Client(knowledge.mcp) as client:
            return await client.call_tool("find_clinical_trials", {"condition": "type 2 diabetes"})

    result = asyncio.run(run()).structured_content
    statuses = {t["status"] for t in result["trials"]}
    assert result["trials"][0]["nct_id"] == "NCT-DEMO-0001"
    with_null, _ = call("find_clinical_trials", {"condition": "type 2 diabetes", "status": None})
    assert result["trials"] == with_null["trials"] and statuses


def test_every_tool_is_read_only():
    tools = _tools()
    assert {"get_trial_details", "drug_vocabulary"} <= set(tools)
    assert all(t.annotations.read_only_hint is True for t in tools.values())


# -- check_drug_safety -------------------------------------------------------------------------
@pytest.mark.parametrize("name, generic", [
    ("Tylenol", "acetaminophen"), ("paracetamol", "acetaminophen"), ("COUMADIN", "warfarin"),
    ("warfarin sodium", "warfarin"), ("metformin 500 mg", "metformin"), ("Advil", "ibuprofen"),
    ("Tikosyn", "dofetilide"), ("insulin glargine", "insulin glargine"), ("Lantus", "insulin glargine"),
])
def test_drug_safety_matches_generic_brand_and_synonym_names(server, name, generic):
    result, error = call("check_drug_safety", {"drug_name": name})
    assert error is None
    assert result["drug"] == generic and result["matched_name"] == name


def test_drug_safety_returns_boxed_warning_contraindications_and_source(server):
    result, _ = call("check_drug_safety", {"drug_name": "dofetilide"})
    assert result["has_boxed_warning"] is True
    assert "continuous ECG" in result["boxed_warning"] and "creatinine clearance" in result["boxed_warning"]
    assert any("QTc" in c for c in result["contraindications"])
    assert result["major_warnings"] and result["demo_content"] is True
    assert "FDA prescribing information" in result["source"]
    no_box, _ = call("check_drug_safety", {"drug_name": "amoxicillin"})
    assert no_box["has_boxed_warning"] is False and no_box["boxed_warning"] is None
    assert any("beta-lactam" in c for c in no_box["contraindications"])


def test_unknown_drug_is_reported_as_not_in_database_never_as_no_warning(server):
    result, error = call("check_drug_safety", {"drug_name": "Unobtainium"})
    assert result is None
    assert error[0] == "drug_not_in_database"
    assert "Unobtainium" in error[1] and "does not mean it is safe" in error[1]


def test_drug_safety_rejects_arguments_outside_the_contract(server):
    too_long = "Warfarinxyz" * 6
    _, error = call("check_drug_safety", {"drug_name": too_long})
    assert error == ("invalid_args", "check drug_name")
    assert "Warfarinxyz" not in error[1]


@pytest.mark.parametrize("tool, args, kind, field", [
    ("check_drug_safety", {}, "missing_required_args", "drug_name"),
    ("check_drug_safety", {"drug_name": ["Plavixqq"]}, "invalid_args", "drug_name"),
    ("check_drug_interactions", {}, "missing_required_args", "drug_names"),
    ("check_drug_interactions", {"drug_names": "Plavixqq"}, "invalid_args", "drug_names"),
    ("search_medical_literature", {"query": 12345678}, "invalid_args", "query"),
    ("find_clinical_trials", {"condition": "asthma", "status": "Plavixqq"}, "invalid_args", "status"),
    ("get_trial_details", {}, "missing_required_args", "nct_id"),
    ("check_drug_safety", {"drug_name": "warfarin", "Plavixqq": 1}, "invalid_args", "Plavixqq"),
])
def test_argument_errors_carry_the_contract_error_type_and_no_values(server, tool, args, kind, field):
    _, error = call(tool, args)
    assert error is not None and error[0] == kind
    assert field in error[1]
    assert "12345678" not in error[1] and "'Plavixqq'" not in error[1] and "input" not in error[1].lower()


# -- check_drug_interactions -------------------------------------------------------------------
def test_interactions_checks_every_pair_in_any_order(server):
    result, error = call("check_drug_interactions", {"drug_names": ["Advil", "Coumadin", "aspirin"]})
    assert error is None
    assert result["pairs_checked"] == 3
    found = {tuple(i["drugs"]): i for i in result["interactions"]}
    assert set(found) == {("aspirin", "warfarin"), ("ibuprofen", "warfarin"), ("aspirin", "ibuprofen")}
    assert [i["severity"] for i in result["interactions"]] == ["major", "major", "moderate"]
    assert all(i["mechanism"] and i["management"] for i in result["interactions"])
    reverse, _ = call("check_drug_interactions", {"drug_names": ["aspirin", "Coumadin", "Advil"]})
    assert {tuple(i["drugs"]) for i in reverse["interactions"]} == set(found)


@pytest.mark.parametrize("a, b, severity, phrase", [
    ("simvastatin", "clarithromycin", "contraindicated", "CYP3A4"),
    ("lisinopril", "spironolactone", "major", "potassium"),
    ("digoxin", "amiodarone", "major", "digoxin"),
    ("warfarin", "fluconazole", "major", "CYP2C9"),
    ("Plavix", "Prilosec", "major", "CYP2C19"),
])
def test_known_interactions(server, a, b, severity, phrase):
    result, _ = call("check_drug_interactions", {"drug_names": [a, b]})
    [interaction] = result["interactions"]
    assert interaction["severity"] == severity and phrase in interaction["mechanism"] + interaction["management"]


def test_no_known_interaction_among_known_drugs_is_a_valid_result(server):
    result, error = call("check_drug_interactions", {"drug_names": ["amoxicillin", "levothyroxine"]})
    assert error is None
    assert result["interactions"] == [] and result["pairs_checked"] == 1
    assert "No known interaction" in result["note"]


def test_unrecognised_names_are_listed_alongside_results(server):
    result, _ = call("check_drug_interactions", {"drug_names": ["warfarin", "aspirin", "Zorblax"]})
    assert result["not_recognised"] == ["Zorblax"]
    assert result["pairs_checked"] == 1 and len(result["interactions"]) == 1


def test_fewer_than_two_recognised_drugs_is_drug_not_in_database(server):
    _, error = call("check_drug_interactions", {"drug_names": ["warfarin", "Zorblax"]})
    assert error[0] == "drug_not_in_database" and "Zorblax" in error[1]
    _, error = call("check_drug_interactions", {"drug_names": ["Quux", "Zorblax"]})
    assert error[0] == "drug_not_in_database" and "Quux" in error[1] and "Zorblax" in error[1]


def test_same_drug_under_two_names_is_flagged(server):
    result, _ = call("check_drug_interactions", {"drug_names": ["Tylenol", "acetaminophen", "warfarin"]})
    assert result["same_drug_given_twice"] == [["Tylenol", "acetaminophen"]]
    assert result["pairs_checked"] == 1 and result["interactions"][0]["drugs"] == ["acetaminophen", "warfarin"]


def test_interaction_list_length_follows_the_contract(server):
    _, error = call("check_drug_interactions", {"drug_names": ["warfarin"]})
    assert error == ("invalid_args", "check drug_names")
    _, error = call("check_drug_interactions", {"drug_names": ["warfarin"] * 7})
    assert error == ("invalid_args", "check drug_names")


# -- literature --------------------------------------------------------------------------------
def test_literature_search_ranks_the_best_match_first(server):
    result, error = call("search_medical_literature", {"query": "apixaban versus warfarin atrial fibrillation"})
    assert error is None
    first = result["articles"][0]
    assert first["pmid"] == "21870978" and first["journal"] == "N Engl J Med" and first["year"] == 2011
    assert first["snippet"] and first["demo_paraphrase"] is True


def test_literature_search_expands_abbreviations_and_stems(server):
    result, _ = call("search_medical_literature", {"query": "intensive BP control"})
    assert "26551272" in [a["pmid"] for a in result["articles"]]
    result, _ = call("search_medical_literature", {"query": "metformin diabetic"})
    assert "9742977" in [a["pmid"] for a in result["articles"]]


def test_literature_search_without_match_is_not_found(server):
    _, error = call("search_medical_literature", {"query": "xylophone zeppelin"})
    assert error[0] == "not_found"


# -- trials ------------------------------------------------------------------------------------
def test_find_trials_filters_by_status_and_ranks_by_condition(server):
    result, error = call("find_clinical_trials", {"condition": "type 2 diabetes", "status": "recruiting"})
    assert error is None
    assert result["trials"][0]["nct_id"] == "NCT-DEMO-0001"
    assert all(t["status"] in ("RECRUITING", "NOT_YET_RECRUITING", "ENROLLING_BY_INVITATION") for t in result["trials"])
    first = result["trials"][0]
    assert first["demo_record"] is True and first["phase"] == "Phase 4" and first["locations"]


def test_find_trials_on_the_real_sample(server):
    result, _ = call("find_clinical_trials", {"condition": "malignant pleural mesothelioma", "status": "any"})
    assert result["count"] >= 5 and not any(t["demo_record"] for t in result["trials"])
    assert all(t["nct_id"].startswith("NCT0") for t in result["trials"])
    completed, _ = call("find_clinical_trials", {"condition": "mesothelioma", "status": "completed"})
    assert completed["trials"] and all(t["status"] == "COMPLETED" for t in completed["trials"])


def test_find_trials_without_match_is_not_found(server):
    _, error = call("find_clinical_trials", {"condition": "asthma", "status": "active"})
    assert error[0] == "not_found" and "asthma" in error[1]
    _, error = call("find_clinical_trials", {"condition": "dragon pox", "status": None})
    assert error[0] == "not_found"


def test_trial_details(server):
    result, error = call("get_trial_details", {"nct_id": " nct00042770 "})
    assert error is None
    assert result["nct_id"] == "NCT00042770" and "malignant pleural effusion" in result["eligibility_criteria"]
    demo, _ = call("get_trial_details", {"nct_id": "NCT-DEMO-0006"})
    assert demo["sex"] == "FEMALE" and demo["minimum_age"] == "18 Years" and demo["demo_record"] is True
    _, error = call("get_trial_details", {"nct_id": "NCT00000000"})
    assert error[0] == "not_found"


# -- vocabulary --------------------------------------------------------------------------------
def test_drug_vocabulary_lists_generic_and_brand_names_sorted(server):
    result, _ = call("drug_vocabulary", {})
    names = result["names"]
    assert result["count"] == len(names) == len(set(names))
    assert names == sorted(names, key=lambda n: (n.lower(), n))
    assert {"acetaminophen", "Tylenol", "warfarin", "Coumadin", "Tikosyn", "insulin glargine"} <= set(names)


def test_missing_database_is_built_on_first_call(tmp_path):
    knowledge.configure(tmp_path / "fresh" / "knowledge.sqlite")
    try:
        result, error = call("check_drug_safety", {"drug_name": "warfarin"})
        assert error is None and result["has_boxed_warning"] is True
    finally:
        knowledge.configure(None)


def test_the_launcher_defaults_to_the_data_home(appliance_home, monkeypatch):
    monkeypatch.setattr(knowledge.mcp, "run", lambda **kwargs: None)  # parse and configure, serve nothing
    try:
        assert knowledge.main([]) == 0
        result, error = call("check_drug_safety", {"drug_name": "warfarin"})
    finally:
        knowledge.configure(None)
    assert error is None and result["has_boxed_warning"] is True
    assert (appliance_home / "knowledge.sqlite").exists()
