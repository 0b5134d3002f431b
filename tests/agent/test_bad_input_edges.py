"""Bad input at the agent's edge: an empty question costs no model call; a prescription whose
drug is no drug name ("mild") is asked about, never sent; a permanent fault is not retried and
a failed write says the record was not changed."""

from __future__ import annotations

import pytest

from appliance.agent.graph import EMPTY_QUESTION, Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.scripted import ScriptedToolBox
from tests.agent.helpers import approve_as_override

IA, IC, TS, TE, RC, DR, EH, SY = (
    "INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE",
    "RESULT_CLASSIFY", "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "SYNTHESIZE",
)
PRESCRIBE = {"intent": "TOOL_NEEDED", "task_summary": "Write a prescription.", "suggested_tool": "prescribe_medication"}


def run(query, script, tools=None, **kw):
    model = ScriptedModel(script)
    toolbox = ScriptedToolBox(tools or {}, fallback=None, drug_names=["metformin"])
    result = Agent(model, toolbox, Settings(), approve_as_override).run_turn(query, **kw)
    assert model.pending() == {}, f"unused scripted replies: {model.pending()}"
    return result, model, toolbox


@pytest.mark.parametrize("query", ["", "   ", "\n\t", "\u200b\u200b", "\x00"])
def test_an_empty_question_runs_no_node_and_no_model_call(query):
    result, model, toolbox = run(query, {})
    assert result.response == EMPTY_QUESTION and result.kind == "clarification"
    assert result.path == [] and model.history == [] and toolbox.calls == []


@pytest.mark.parametrize("drug", ["mild", "Smith"])
def test_a_prescription_of_something_that_is_no_drug_is_asked_about(drug):
    result, model, toolbox = run(
        f"Prescribe {drug} 500 mg twice daily for abc-123",
        {IC: [PRESCRIBE],
         TS: [{"tool_name": "prescribe_medication"},
              {"patient_id": "abc-123", "medication_name": drug, "dosage": "500 mg", "frequency": "twice daily",
               "notes": None}]},
    )
    assert result.path == [IA, IC, TS, TE, RC, DR, EH, SY]
    assert toolbox.calls == []  # neither the safety gate's chart read nor the write
    assert result.response == "I need more information to complete this request: medication name."


def test_a_permanent_fault_on_a_write_is_not_retried_and_says_nothing_changed():
    result, model, toolbox = run(
        "Prescribe metformin 500 mg twice daily for abc-123",
        {IC: [PRESCRIBE],
         TS: []},  # the order is read in full from the words: code's call
        {"get_patient_chart": [{"result": {"patient": {"patient_id": "abc-123"}, "medications": [], "allergies": [],
                                           "active_problems": []}}],
         "prescribe_medication": [{"error_type": "permanent_failure", "message": "its database is read-only"}]},
    )
    assert result.path == [IA, IC, TS, TE, RC, DR, EH, SY]
    assert [c[0] for c in toolbox.calls].count("prescribe_medication") == 1  # once, never again
    assert [c.node for c in model.history] == [IC]  # the tool, the label, the retry and the answer: code's
    assert ("The Prescription cannot be used until an administrator repairs its database; retrying will not help. "
            "The record was not changed.") in result.response
