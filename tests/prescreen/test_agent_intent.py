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
    model = ScriptedModel({
        IC: [intent("prescreen_for_trials")],
        TS: [{"tool_name": "prescreen_for_trials"}, {"patient_id": "pat-001", "condition": None}],
        # one trial found for the agent's three: the model is asked for another search, and stops
        "PRESCREEN_SEARCH": [{"action": "stop", "condition": None, "intervention": None, "eligibility_keywords": None}],
        "CRITERION_INCLUSION": [{"meets_criterion": "yes", "cited_facts": ["P1"], "reason": "Recorded problem."}],
        "CRITERION_EXCLUSION": [{"excluding_condition_present": "unknown", "cited_facts": [], "reason": "Not recorded."}],
        RC: [good()],
        SY: ["One trial may fit: NCT02300883, pending specimen availability."],
    })
    tools = ScriptedToolBox({"get_patient_chart": [{"result": CHART}], "find_clinical_trials": [{"result": SEARCH}],
                             "get_trial_details": [{"result": DETAILS}]}, fallback=None, drug_names=[])
    result = Agent(model, tools, Settings(), deny_all).run_turn("Is this patient eligible for any trials?",
                                                                patient_id="pat-001")
    assert result.path == [IA, IC, TS, TE, RC, DR, SY]
    assert [t for t, _ in tools.calls] == ["get_patient_chart", "find_clinical_trials", "get_trial_details"]
    (call,) = result.tool_calls
    assert call["tool"] == "prescreen_for_trials" and call["label"] == "Trial Prescreen" and call["error_type"] is None
    synthesis = model.history[-1].messages[-1].content
    assert "[Trial Prescreen]" in synthesis and "NCT02300883" in synthesis and "UNCERTAIN" in synthesis
    assert "prescreen_for_trials" not in synthesis
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
    model = ScriptedModel({
        IC: [intent("get_trial_details")],
        TS: [{"tool_name": "get_trial_details"}, {"nct_id": "NCT02300883"}],
        RC: [good()],
        SY: ["Inclusion: malignant pleural mesothelioma. Exclusion: no specimens."],
    })
    tools = ScriptedToolBox({"get_trial_details": [{"result": DETAILS}]}, fallback=None, drug_names=[])
    result = Agent(model, tools, Settings(), deny_all).run_turn("Eligibility criteria of NCT02300883?")
    assert result.path == [IA, IC, TS, TE, RC, DR, SY]
    assert tools.calls == [("get_trial_details", {"nct_id": "NCT02300883"})]
    assert result.tool_calls[0]["label"] == "Clinical Trial Details"
    assert "inclusion_criteria" in model.history[-1].messages[-1].content
