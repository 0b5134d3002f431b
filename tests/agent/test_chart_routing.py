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
])
def test_without_a_patient_code_settled_on_the_model_is_asked(query, kw):
    with pytest.raises(ScriptError, match="no reply left for node INTENT_CLASSIFY"):
        _turn(query, {}, **kw)


AISHA = {"patient": {"patient_id": "pat-008", "name": "Aisha Patel"}, "allergies": [], "medications": [],
         "problems": []}


def _named_turn(query: str, matches: list[dict], **kw):
    model = ScriptedModel({})
    found = ({"result": {"total_matches": len(matches), "matches": matches}} if matches else
             {"error": "No patient found matching 'Zed Nobody'", "error_type": "not_found"})
    tools = ScriptedToolBox({"search_patient": [found], "get_patient_chart": [{"result": AISHA}]},
                            fallback=None, drug_names=[])
    result = Agent(model, tools, Settings(), deny_all).run_turn(query, **kw)
    assert model.history == []  # code routes every step: no model call
    return result, tools


@pytest.mark.parametrize("query", ["What allergies does Aisha Patel have?", "Show me Aisha Patel's labs",
                                   "Any allergies for patient Aisha Patel?", "what meds is Aisha Patel on"])
def test_a_chart_question_naming_another_patient_is_never_answered_from_the_open_chart(query):
    """John Smith open, Aisha Patel named: code searches the name and reads her chart."""
    match = {"patient_id": "pat-008", "name": "Aisha Patel", "birth_date": "1995-02-14"}
    result, tools = _named_turn(query, [match], patient_id="abc-123")
    assert tools.calls == [("search_patient", {"name": "Aisha Patel"}), ("get_patient_chart", {"patient_id": "pat-008"})]
    assert "abc-123" not in result.response and "Aisha Patel" in result.response


def test_a_name_several_patients_share_is_asked_and_no_chart_is_read():
    wilsons = [{"patient_id": f"pat-00{i}", "name": "James Wilson", "birth_date": f"19{i}0-01-01"} for i in (2, 3, 4)]
    result, tools = _named_turn("What allergies does James Wilson have?", wilsons, patient_id="abc-123")
    assert [t for t, _ in tools.calls] == ["search_patient"]
    assert "Which one" in result.response or "which one" in result.response


def test_a_name_no_patient_has_is_said_and_no_chart_is_read():
    result, tools = _named_turn("What allergies does Zed Nobody have?", [], patient_id="abc-123")
    assert [t for t, _ in tools.calls] == ["search_patient"]
    assert result.response.startswith("No patient named Zed Nobody is in the record.")


@pytest.mark.parametrize("query,names", [
    ("What allergies does Aisha Patel have?", ("Aisha Patel",)),
    ("Show me Aisha Patel's labs", ("Aisha Patel",)),
    ("labs for John Smith please", ("John Smith",)),
    ("patient named Maria Garcia", ("Maria Garcia",)),
    ("What is Dr Smith's number", ()),  # a title names a clinician, and one word is no name
    ("Is she on Lasix Daily?", ()),
    ("interaction between Coumadin and Bactrim DS", ()),
    ("What Is The dose", ()),
    ("Any allergies?", ()),
])
def test_the_people_a_question_names(query, names):
    from appliance.agent.reading.request import person_names
    from appliance.medication.names import DrugRecogniser

    assert person_names(query, DrugRecogniser()) == names
