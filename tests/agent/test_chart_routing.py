"""A chart question code can route costs no INTENT_CLASSIFY call (docs/design.md §2, §4.2): the
chart sections are in the reading and the patient is code's (open, or typed)."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.errors import ScriptError
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import deny_all
from appliance.tools.scripted import ScriptedToolBox

CHART = {"patient": {"patient_id": "pat-002", "name": "Maria Garcia"},
         "allergies": [{"substance": "penicillin", "reaction": "rash", "severity": "moderate"}],
         "medications": [{"medication_name": "lisinopril", "dosage": "10 mg", "frequency": "daily", "status": "active"}],
         "problems": [{"display": "Hypertension"}]}
INTENT = {"intent": "TOOL_NEEDED", "task_summary": "Chart.", "suggested_tool": "get_patient_chart"}


def _turn(query: str, script: dict, **kw):
    model = ScriptedModel(script)
    tools = ScriptedToolBox({"get_patient_chart": [{"result": CHART}]}, fallback=None, drug_names=[])
    result = Agent(model, tools, Settings(), deny_all).run_turn(query, **kw)
    assert model.pending() == {}, model.pending()
    return result, model, tools


@pytest.mark.parametrize("query,kw", [
    ("Any allergies?", {"patient_id": "pat-002"}),
    ("What is she on?", {"patient_id": "pat-002"}),
    ("Show the chart of pat-002", {}),
])
def test_a_chart_question_about_codes_patient_makes_no_model_call(query, kw):
    result, model, tools = _turn(query, {}, **kw)
    assert model.history == []
    intent = next(e for e in result.trace if e.node == "INTENT_CLASSIFY")
    assert intent.output["by"] == "code" and intent.output["suggested_tool"] == "get_patient_chart"
    assert tools.calls == [("get_patient_chart", {"patient_id": "pat-002"})]


def test_the_summary_names_the_sections_asked():
    result, _, _ = _turn("Any allergies?", {}, patient_id="pat-002")
    assert result.state.task_summary == "The clinician asks about the patient's allergies."


@pytest.mark.parametrize("query,kw", [
    ("Any allergies?", {}),  # no patient: the model (and then the clinician) says whose chart
    ("Any allergies for patient Maria Garcia?", {"patient_id": "pat-002"}),  # another patient named
])
def test_without_a_patient_code_settled_on_the_model_is_asked(query, kw):
    with pytest.raises(ScriptError, match="no reply left for node INTENT_CLASSIFY"):
        _turn(query, {}, **kw)
