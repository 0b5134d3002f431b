"""Code's own words where code knows the answer (``appliance.agent.code_answers``) and the fact
guard's withheld notice (``synthesize.withheld_answer``): what was written in clinical words,
never a record dump or an id; a notice that says where it looked and never lists nothing."""

from __future__ import annotations

from appliance.agent.fact_guard import Unsupported
from appliance.agent.nodes.synthesize import (
    NOT_READ,
    NOTHING_HELD,
    run,
    withheld_answer,
)
from appliance.agent.state import AgentState, ToolResult
from appliance.llm.fake import ScriptedModel
from tests.agent.helpers import state

WRITTEN = ToolResult("prescribe_medication", "Prescription",
                     {"patient_id": "abc-123", "medication_name": "amoxicillin", "dosage": "500 mg",
                      "frequency": "three times daily", "notes": None},
                     {"id": "54ab4be4-9f1e", "patient_id": "abc-123", "medication_name": "amoxicillin",
                      "dosage": "500 mg", "frequency": "three times daily", "status": "active", "author": "drx"},
                     "[Prescription] id: 54ab4be4-9f1e author: drx")
CHART = ToolResult("get_patient_chart", "Patient Record", {"patient_id": "abc-123"},
                   {"patient": {"patient_id": "abc-123", "name": "John Smith"}, "allergies": []}, "[Patient Record] ...")


def test_a_written_prescription_is_said_in_clinical_words_with_no_model_call():
    model = ScriptedModel({})
    done = run(state("Prescribe amoxicillin 500 mg three times daily", results=(CHART, WRITTEN),
                     intent="TOOL_NEEDED"), model)
    update, output = done.update, done.output
    answer = update["final_response"]
    # the chart read this turn first (its sections), then what was written
    assert answer.endswith("\n\nPrescribed amoxicillin 500 mg three times daily for John Smith. The record was changed.")
    assert "54ab4be4" not in answer and "drx" not in answer and "Here is what was found" not in answer
    assert model.history == [] and output["by"] == "code"


def test_a_withheld_answer_with_no_source_says_so_instead_of_an_empty_list():
    text = withheld_answer(AgentState(user_query="does she have a penicillin allergy?", selected_patient_id="pat-006"),
                           [Unsupported("allergen", "penicillin")])
    assert "could not be found in your question" in text
    assert NOT_READ.strip() in text  # never taken for the chart's word: the chart was not read
    assert text.endswith(NOTHING_HELD) and "What the sources hold:" not in text


def test_a_withheld_answer_names_where_it_looked_and_the_sources_facts():
    st = state("Review the chart", results=(CHART,), intent="TOOL_NEEDED", selected_patient_id="abc-123")
    text = withheld_answer(st, [Unsupported("drug", "warfarin")])
    assert "drug 'warfarin', which could not be found in the Patient Record or your question." in text
    assert NOT_READ.strip() not in text
    assert "What the sources hold:\nFrom the chart of John Smith" in text
