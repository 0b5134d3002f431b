"""Every step a request names runs, or the answer's input says which did not (docs/design.md
§11, §4.8); dictated text routes nothing but still reaches the note and the grounding check."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.agent.nodes import synthesize
from appliance.agent.nodes.router import Limits, route, steps_not_done
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import approve_all, deny_all
from appliance.tools.scripted import ScriptedToolBox
from tests.agent.helpers import approve_as_override, ok, state

IA, IC, TS, TE, RC, DR, EH, SY = (
    "INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE",
    "RESULT_CLASSIFY", "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "SYNTHESIZE",
)
LOOP = [TS, TE, RC, DR]
ONE = {"total_matches": 1, "matches": [{"patient_id": "pat-311", "name": "Omar Haddad", "birth_date": "1949-11-30"}]}
THREE_STEPS = "Find Omar Haddad, pull his chart and check his meds against clarithromycin"

ROUTE_ROWS = [
    # (id, state, expected next, words expected in the reason)
    ("three named, one done", state(THREE_STEPS, [ok("search_patient", ONE, name="Omar Haddad")]),
     TS, "check_drug_interactions, get_patient_chart"),
    ("three named, two done", state(THREE_STEPS, [ok("search_patient", ONE, name="Omar Haddad"), ok("get_patient_chart", patient_id="pat-311")]),
     TS, "check_drug_interactions"),
    ("three named, three done", state(THREE_STEPS, [ok("search_patient", ONE, name="Omar Haddad"), ok("get_patient_chart", patient_id="pat-311"),
                                                    ok("check_drug_interactions", drug_names=["clarithromycin", "atorvastatin"])]),
     SY, "every part"),
    ("'interacts with' is a step", state("Does ciprofloxacin interact with tizanidine? Any papers on it?",
                                         [ok("search_medical_literature", query="ciprofloxacin tizanidine")]),
     TS, "check_drug_interactions"),
    ("'safe together' needs no safety report", state("Are sertraline and tramadol safe together?",
                                                     [ok("check_drug_interactions", drug_names=["sertraline", "tramadol"])]),
     SY, "every part"),
    ("dictated 'interactions' needs no check", state("Save a note for pat-311: asked about interactions with clarithromycin",
                                                     [ok("save_clinical_note", {"id": 9}, patient_id="pat-311")], ids=["pat-311"]),
     SY, "every part"),
    ("a name in the words is searched even with another patient open",
     state("Find Omar Haddad and review his labs", [ok("get_patient_chart", patient_id="pat-100")], selected_patient_id="pat-100"),
     TS, "search_patient"),
    ("a question about prescribing needs no prescription", state("Should I prescribe doxycycline? Check its warnings",
                                                                  [ok("check_drug_safety", drug_name="doxycycline")]),
     SY, "every part"),
]


@pytest.mark.parametrize("case_id,st,expected,reason_words", ROUTE_ROWS, ids=[r[0] for r in ROUTE_ROWS])
def test_route_table_for_named_steps(case_id, st, expected, reason_words):
    decision = route(st, Limits())
    assert decision.next == expected, decision.reason
    assert reason_words in decision.reason


def test_steps_not_done_are_the_named_ones_left_in_the_order_named():
    st = state(THREE_STEPS, [ok("search_patient", ONE, name="Omar Haddad")], step_count=4)
    assert route(st, Limits()).next == SY  # the step limit ends the loop ...
    assert [s.tool for s in steps_not_done(st)] == ["get_patient_chart", "check_drug_interactions"]  # ... with these left
    assert steps_not_done(state("Find Omar Haddad and check his chart", names=["Omar Haddad"]))[0].tool == "search_patient"


def test_the_not_done_line_is_codes_and_only_for_tool_turns():
    st = state(THREE_STEPS, [ok("search_patient", ONE, name="Omar Haddad")], step_count=4, intent="TOOL_NEEDED")
    line = "Part of the request was not done: review the patient's chart; check the drugs against each other for interactions."
    assert synthesize.not_done_message(st) == line
    assert f"Unavailable information:\n- {line}" in synthesize.user_message(st)
    assert line in synthesize.fallback_answer(st)
    done = state("Boxed warnings for dronedarone?", [ok("check_drug_safety", drug_name="dronedarone")], intent="TOOL_NEEDED")
    assert synthesize.not_done_message(done) is None
    assert synthesize.not_done_message(state("Is it safe to run?", intent="DIRECT")) is None


# -- through the graph, with a scripted model ---------------------------------------------------
def _run(query, script, tools, approver=deny_all, drugs=("clarithromycin", "atorvastatin", "warfarin", "aspirin")):
    model = ScriptedModel(script)
    agent = Agent(model, ScriptedToolBox(tools, fallback=None, drug_names=list(drugs)), Settings(), approver)
    result = agent.run_turn(query)
    assert model.pending() == {}, model.pending()
    return result, model


def _intent(tool):
    return {"intent": "TOOL_NEEDED", "task_summary": "Clinician's request.", "suggested_tool": tool}


GOOD = {"quality": "success_rich", "brief_summary": "Data returned."}


def test_a_request_naming_three_steps_runs_three_even_when_the_model_says_none():
    chart = {"patient": {"patient_id": "pat-311"}, "medications": [{"name": "atorvastatin"}]}
    interactions = {"interactions": [{"drugs": ["atorvastatin", "clarithromycin"], "severity": "major"}]}
    result, _ = _run(
        THREE_STEPS,
        {IC: [_intent("search_patient")],
         TS: [{"tool_name": "search_patient"}, {"name": "Omar Haddad"},
              # the chart of the one patient found is code's call (appliance.agent.settled_patient.code_patient)
              {"tool_name": "none"},  # the model thinks it is done; the patterns say not
              {"tool_name": "check_drug_interactions"}, {"drug_names": ["clarithromycin", "atorvastatin"]}]},
        {"search_patient": [{"result": ONE}], "get_patient_chart": [{"result": chart}],
         "check_drug_interactions": [{"result": interactions}]},
    )
    assert result.path == [IA, IC, *LOOP, *LOOP, TS, DR, *LOOP, SY]
    assert [c["tool"] for c in result.tool_calls] == ["search_patient", "get_patient_chart", "check_drug_interactions"]
    assert "atorvastatin + clarithromycin: major" in result.response


def test_at_the_step_limit_the_answers_input_and_fallback_name_what_was_not_done():
    query = "Find Omar Haddad, review his chart, check atorvastatin safety, find studies and recruiting trials"
    tools = {"search_patient": [{"result": ONE}], "get_patient_chart": [{"result": {"a": 1}}],
             "check_drug_safety": [{"result": {"b": 2}}], "search_medical_literature": [{"result": {"c": 3}}]}
    script = {IC: [_intent("search_patient")],
              TS: [{"tool_name": "search_patient"}, {"name": "Omar Haddad"},  # the chart: code's call
                   {"tool_name": "check_drug_safety"}, {"drug_name": "atorvastatin"},
                   {"tool_name": "search_medical_literature"}, {"query": "atorvastatin"}]}
    result, model = _run(query, script, tools)
    assert "step limit" in result.router[-1]["reason"]
    line = "Part of the request was not done: find clinical trials."
    assert SY not in [c.node for c in model.history]  # code reads every result: its answer says it
    assert result.trace[-1].output["by"] == "code" and line in result.response


def test_a_dictated_note_routes_nothing_but_its_words_reach_the_note():
    query = "Save a note for pat-311: asked about interactions between warfarin and aspirin, wants trials"
    note = {"patient_id": "pat-311", "note_type": "progress",
            "note_text": "asked about interactions between warfarin and aspirin, wants trials"}
    result, model = _run(
        query,
        {IC: [_intent("save_clinical_note")], TS: [{"tool_name": "save_clinical_note"}, note]},
        {"save_clinical_note": [{"result": {"id": 12}}]}, approver=approve_all,
    )
    assert result.path == [IA, IC, *LOOP, SY]  # no interaction check, no trial search
    assert [c["tool"] for c in result.tool_calls] == ["save_clinical_note"]
    stage1, stage2 = model.history[1], model.history[2]
    request_line = [line for line in stage1.messages[-1].content.splitlines() if line.startswith("Request:")][-1]
    assert "interactions" not in request_line and "(dictated text)" in request_line
    assert "asked about interactions between warfarin and aspirin" in stage2.messages[-1].content


def test_dictated_write_values_are_still_the_clinicians_words_for_grounding():
    query = 'Prescribe "warfarin 5 mg once daily" for pat-311'
    args = {"patient_id": "pat-311", "medication_name": "warfarin", "dosage": "5 mg", "frequency": "once daily", "notes": None}
    result, _ = _run(
        query,
        {IC: [_intent("prescribe_medication")], TS: []},  # the order parser reads the quoted words: code's call
        {"prescribe_medication": [{"result": {"id": 3, "status": "active"}}]}, approver=approve_as_override,
    )
    assert result.tool_calls[0]["error_type"] is None  # grounded in the quoted words, approved, written
    assert result.tool_calls[0]["args"] == args
