"""The agent intent "is this patient eligible for any trials?": the task pattern requires the
prescreen, TOOL_EXECUTE runs the pipeline in the agent process (appliance.prescreen.tool), and
get_trial_details is an agent tool of its own."""

from __future__ import annotations

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import deny_all
from appliance.tools.scripted import ScriptedToolBox

IA, IC, TS, TE, RC, DR, SY = ("INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE", "RESULT_CLASSIFY",
                              "DETERMINISTIC_ROUTER", "SYNTHESIZE")
CHART = {"patient": {"patient_id": "pat-001", "name": "Maria Garcia", "age": 54, "sex": "female"},
         "active_problems": [{"display": "Malignant pleural mesothelioma", "onset_date": "2025-01-10"}]}
SEARCH = {"trials": [{"nct_id": "NCT02300883", "title": "Biological characteristics of mesothelioma"}]}
DETAILS = {"nct_id": "NCT02300883", "title": "Biological characteristics of mesothelioma", "status": "RECRUITING",
           "minimum_age": "18 Years", "maximum_age": None, "sex": "ALL",
           "inclusion_criteria": ["Malignant pleural mesothelioma patients"],
           "exclusion_criteria": ["Unavailability of pleural effusion and tumour specimens"]}


def intent(tool):
    return {"intent": "TOOL_NEEDED", "task_summary": "Trial eligibility for the open patient.", "suggested_tool": tool}


def good():
    return {"quality": "success_rich", "brief_summary": "Trials judged."}


def test_eligible_for_any_trials_runs_the_prescreen_as_one_tool_step():
    # Code routes trial words about the open patient to the prescreen and answers from its
    # result: the model is called only inside the prescreen (its search and the criteria).
    model = ScriptedModel({
        # one trial found for the agent's three: the model is asked for another search, and stops
        "PRESCREEN_SEARCH": [{"action": "stop", "condition": None, "intervention": None, "eligibility_keywords": None}],
        "CRITERION_INCLUSION": [{"meets_criterion": "yes", "cited_facts": ["P1"], "reason": "Recorded problem."}],
        "CRITERION_EXCLUSION": [{"excluding_condition_present": "unknown", "cited_facts": [], "reason": "Not recorded."}],
    })
    tools = ScriptedToolBox({"get_patient_chart": [{"result": CHART}], "find_clinical_trials": [{"result": SEARCH}],
                             "get_trial_details": [{"result": DETAILS}]}, fallback=None, drug_names=[])
    result = Agent(model, tools, Settings(), deny_all).run_turn("Is this patient eligible for any trials?",
                                                                patient_id="pat-001")
    assert result.path == [IA, IC, TS, TE, RC, DR, SY]
    assert [t for t, _ in tools.calls] == ["get_patient_chart", "find_clinical_trials", "get_trial_details"]
    (call,) = result.tool_calls
    assert call["tool"] == "prescreen_for_trials" and call["label"] == "Trial Prescreen" and call["error_type"] is None
    assert [c.node for c in model.history] == ["PRESCREEN_SEARCH", "CRITERION_INCLUSION", "CRITERION_EXCLUSION"]
    assert "NCT02300883" in result.response and "UNCERTAIN" in result.response
    assert "prescreen_for_trials" not in result.response and "not an eligibility decision" in result.response
    assert model.pending() == {}


def test_an_unknown_patient_is_the_records_answer():
    model = ScriptedModel({
        IC: [intent("prescreen_for_trials")],
        TS: [{"tool_name": "prescreen_for_trials"}, {"patient_id": "pat-999", "condition": "mesothelioma"}],
        RC: [{"quality": "error_fatal", "brief_summary": "No such patient."}],
    })
    tools = ScriptedToolBox({"get_patient_chart": [{"error_type": "patient_not_found", "message": "pat-999"}]},
                            fallback=None, drug_names=[])
    result = Agent(model, tools, Settings(), deny_all).run_turn("Is pat-999 eligible for any trials?")
    assert result.tool_calls[0]["error_type"] == "patient_not_found"
    assert result.kind == "clarification" and "pat-999" in result.response


def test_eligibility_criteria_of_a_trial_is_a_details_lookup():
    model = ScriptedModel({})  # an NCT id is code's to route, and the record's criteria code's to show
    tools = ScriptedToolBox({"get_trial_details": [{"result": DETAILS}]}, fallback=None, drug_names=[])
    result = Agent(model, tools, Settings(), deny_all).run_turn("Eligibility criteria of NCT02300883?")
    assert result.path == [IA, IC, TS, TE, RC, DR, SY]
    assert tools.calls == [("get_trial_details", {"nct_id": "NCT02300883"})]
    assert result.tool_calls[0]["label"] == "Clinical Trial Details"
    assert model.history == []
    assert "Inclusion criteria:\n- Malignant pleural mesothelioma patients" in result.response
    assert "Exclusion criteria:\n- Unavailability of pleural effusion" in result.response
    assert "Ages: 18" in result.response
