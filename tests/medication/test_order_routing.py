"""Order phrasings through the agent's graph with a scripted model that is never asked to pick
the tool or its arguments: code routes each to the write, with the fields the clinician wrote,
or to the right question (which patient; did you mean ...?)."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import Approval
from appliance.tools.scripted import ScriptedToolBox

IC, TS, RC, SY = "INTENT_CLASSIFY", "TOOL_SELECT", "RESULT_CLASSIFY", "SYNTHESIZE"
CHART = {"patient": {"patient_id": "abc-123", "name": "John Smith", "age": 68},
         "medications": [{"id": "m1", "medication_name": "lisinopril", "dosage": "10 mg", "frequency": "daily",
                          "status": "active"}],
         "allergies": [], "active_problems": [], "labs": [], "vitals": []}
# What the model says when asked: the wrong tool (as the demo model did), and a reply for the rest.
SCRIPT = {IC: [{"intent": "TOOL_NEEDED", "task_summary": "An order.", "suggested_tool": "add_allergy"}],
          RC: [{"quality": "error_fatal", "brief_summary": "Not written."}] * 2, SY: ["Not written."] * 2}


def run(query: str, patient: str | None = "abc-123"):
    seen: list[tuple[str, dict]] = []

    def clinician(tool, args, safety=None):
        seen.append((tool, dict(args)))
        return Approval(False, dict(args), "checking routing only")

    model = ScriptedModel({k: list(v) for k, v in SCRIPT.items()})
    tools = ScriptedToolBox({"get_patient_chart": [{"result": CHART}] * 3}, fallback=None,
                            drug_names=["lisinopril", "amoxicillin", "ibuprofen", "acetaminophen"])
    result = Agent(model, tools, Settings(), clinician).run_turn(query, patient_id=patient)
    assert TS not in [c.node for c in model.history]  # code chose the tool and its arguments
    return result, seen


@pytest.mark.parametrize("query, tool, args", [
    ("add ibuprofen 400 q6h prn pain", "prescribe_medication",
     {"medication_name": "ibuprofen", "dosage": "400 mg", "frequency": "q6h prn pain", "notes": None}),
    ("augmentin 875 bid", "prescribe_medication",
     {"medication_name": "augmentin", "dosage": "875 mg", "frequency": "bid", "notes": None}),
    ("rx ibuprofen 400 mg q8h prn", "prescribe_medication",
     {"medication_name": "ibuprofen", "dosage": "400 mg", "frequency": "q8h prn", "notes": None}),
    ("acetaminophen 650 mg PRN max 12/day", "prescribe_medication",
     {"medication_name": "acetaminophen", "dosage": "650 mg", "frequency": "PRN max 12/day", "notes": None}),
    ("start amoxicillin 500 mg TID x 7 days", "prescribe_medication",
     {"medication_name": "amoxicillin", "dosage": "500 mg", "frequency": "TID", "notes": "x 7 days"}),
    ("increase lisinopril to 20 mg daily", "change_medication_order",
     {"medication_name": "lisinopril", "new_medication_name": None, "dosage": "20 mg", "frequency": "daily",
      "reason": None}),
    ("hold lisinopril", "update_medication_status",
     {"medication_name": "lisinopril", "action": "hold", "reason": None}),
    ("d/c lisinopril due to cough", "update_medication_status",
     {"medication_name": "lisinopril", "action": "stop", "reason": "cough"}),
    ("renew lisinopril", "update_medication_status",
     {"medication_name": "lisinopril", "action": "renew", "reason": None}),
])
def test_each_phrasing_reaches_the_approval_with_the_clinicians_fields(query, tool, args):
    result, seen = run(query)
    assert seen == [(tool, {"patient_id": "abc-123", **args})]
    assert result.intent == "TOOL_NEEDED" and result.tool_calls[0]["label"] != "Allergy Documentation"


def test_an_order_with_no_patient_open_asks_which_patient():
    result, seen = run("acetaminophen 650 mg PRN max 12/day", patient=None)
    assert seen == [] and "Field required" not in result.response
    assert "patient" in result.response.lower() and "?" in result.response


def test_a_misspelt_drug_is_a_question_not_a_refusal_or_a_guess():
    result, seen = run("start amoxicilin 500 mg tid")
    assert seen == []
    assert "did you mean amoxicillin?" in result.response


def test_a_misspelt_drug_to_stop_is_a_question_too():
    result, seen = run("stop the lisinoprl")
    assert seen == [] and "did you mean lisinopril?" in result.response


def test_a_change_of_an_order_not_on_the_chart_is_said_before_any_approval():
    result, seen = run("stop the warfarin")  # the chart lists lisinopril only
    assert seen == []
    assert "No active or held order of warfarin is on the patient's chart; nothing was changed." in result.response


def test_two_orders_of_the_drug_are_a_question_before_any_approval():
    two = {**CHART, "medications": CHART["medications"] + [
        {"id": "m2", "medication_name": "lisinopril", "dosage": "5 mg", "frequency": "daily", "status": "active"}]}
    model = ScriptedModel({k: list(v) for k, v in SCRIPT.items()})
    tools = ScriptedToolBox({"get_patient_chart": [{"result": two}]}, fallback=None, drug_names=["lisinopril"])
    seen: list = []
    result = Agent(model, tools, Settings(), lambda *a, **k: seen.append(a)).run_turn(
        "increase lisinopril to 20 mg daily", patient_id="abc-123")
    assert seen == [] and result.kind == "clarification"
    assert "2 orders of lisinopril are on the chart (lisinopril 10 mg daily; lisinopril 5 mg daily): which one?" \
        in result.response
