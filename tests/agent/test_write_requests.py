"""Code decides whether the clinician asked to change the record: a table of what clinicians
type, and the graph's two outcomes (routed to the write, or "The record was not changed.")."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.agent.reading.write_requests import (
    ALLERGY,
    NOT_CHANGED,
    NOTE,
    PRESCRIBE,
    write_requests,
)
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import deny_all
from appliance.tools.scripted import ScriptedToolBox


@pytest.mark.parametrize("text, expected", [
    ("Prescribe metformin 500mg for abc-123", (PRESCRIBE,)),
    ("Please prescribe amoxicillin 500 mg three times daily", (PRESCRIBE,)),
    ("Can you start her on aspirin 81 mg daily?", (PRESCRIBE,)),
    ("Find John Smith and start him on lisinopril 10 mg daily", (PRESCRIBE,)),
    ("Add a penicillin allergy for her", (ALLERGY,)),
    ("Document a penicillin allergy with hives for abc-123", (ALLERGY,)),
    ("Record that he is allergic to latex", (ALLERGY,)),
    ("Write a progress note for abc-123: stable, review in 3 months", (NOTE,)),
    ("Save a note: asked about interactions with warfarin; prescribe nothing today", (NOTE,)),
    ("Can you add a note that she declined the flu vaccine", (NOTE,)),
    ("Add a latex allergy and prescribe cetirizine 10 mg daily", (ALLERGY, PRESCRIBE)),
    # an order verb followed by a treatment and a dose is an order (seen answered "DIRECT")
    ("Start metformin 500 mg twice daily", (PRESCRIBE,)),
    ("start metformin 500mg bid", (PRESCRIBE,)),
    ("Begin lisinopril 10 mg daily", (PRESCRIBE,)),
    ("Order amoxicillin 500 mg TID", (PRESCRIBE,)),
    ("Give ceftriaxone 1 g IV daily", (PRESCRIBE,)),
    ("Can you give her ibuprofen 400 mg q8h prn", (PRESCRIBE,)),
    ("Add atorvastatin 40 mg at night", (PRESCRIBE,)),
    ("add salbutamol 2 puffs q4-6h prn", (PRESCRIBE,)),
    ("start insulin glargine 10 units at night", (PRESCRIBE,)),
    ("Resume warfarin 5 mg daily", (PRESCRIBE,)),
    ("Rx: amoxicillin 500 mg tid", (PRESCRIBE,)),
    # a message that is an order line and nothing else
    ("amoxicillin 500 mg PO TID x 7 days", (PRESCRIBE,)),
    ("Janumet 50/1000 mg BID", (PRESCRIBE,)),
    ("Tylenol 1 g q6h prn pain, max 4 g/day", (PRESCRIBE,)),
    ("salbutamol 2 puffs q4-6h prn", (PRESCRIBE,)),
    # questions and reads are not requests to write
    ("Is warfarin 10 mg once daily safe for this patient?", ()),
    ("Should I prescribe amoxicillin?", ()),
    ("What is hypertension?", ()),
    ("Check interactions between warfarin and aspirin", ()),
    ("Pull up his chart and check his meds", ()),
    ("Start a new session", ()),
    # an order verb without a dose after a treatment's name is not one
    ("Order a CBC", ()),
    ("Order an HbA1c in 3 months", ()),
    ("Order 2 units of blood", ()),
    ("Give me her chart", ()),
    ("give me the last 5 labs", ()),
    ("Give a summary of the last 3 visits", ()),
    ("Should I give her ibuprofen 400 mg?", ()),
    ("Is it ok to start metformin 500 mg?", ()),
    ("metformin 500 mg bid?", ()),
    ("what about metformin 500 mg bid for her kidneys", ()),
    ("Is warfarin 5 mg daily ok", ()),
    ("He takes 5 mg daily", ()),
    ("her warfarin 5 mg daily", ()),
    ("aspirin 81 mg", ()),  # no frequency: not an order line
    ("Last HbA1c 7.9% in March", ()),
    ('He said "prescribe me something strong"', ()),  # quoted words are data
])
def test_write_requests(text, expected):
    assert write_requests(text) == expected


def agent(script: dict, tools: dict | None = None) -> tuple[Agent, ScriptedModel, ScriptedToolBox]:
    model = ScriptedModel(script)
    box = ScriptedToolBox(tools or {}, fallback=None, drug_names=["amoxicillin", "metformin"])
    return Agent(model, box, Settings(), deny_all), model, box


DIRECT = {"intent": "DIRECT", "task_summary": "General question.", "suggested_tool": None}


def test_a_write_request_the_model_calls_direct_is_routed_to_the_write():
    script = {"INTENT_CLASSIFY": [DIRECT],
              "TOOL_SELECT": [{"tool_name": "prescribe_medication"},
                              {"patient_id": "abc-123", "medication_name": "amoxicillin", "dosage": "500 mg",
                               "frequency": "three times daily", "notes": None}]}
    a, model, box = agent(script)
    result = a.run_turn("Prescribe amoxicillin 500 mg three times daily for abc-123")
    assert result.path[:4] == ["INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE"]
    assert result.intent == "TOOL_NEEDED"
    assert "asked to change the record" in result.trace[1].output["overruled"]
    assert [c[0] for c in box.calls] == ["get_patient_chart"]  # the safety gate read; deny_all: nothing written
    assert result.response.endswith(NOT_CHANGED)  # and the answer says so


def test_a_question_about_a_drug_is_answered_without_a_write_and_without_the_notice():
    script = {"INTENT_CLASSIFY": [DIRECT], "SYNTHESIZE": ["Amoxicillin is a penicillin antibiotic."]}
    a, _, _ = agent(script)
    result = a.run_turn("Is amoxicillin a penicillin?")
    assert result.path == ["INPUT_ASSEMBLY", "INTENT_CLASSIFY", "SYNTHESIZE"]
    assert result.response == "Amoxicillin is a penicillin antibiotic."


def test_answers_carry_the_demo_notice_and_patient_data_carries_the_chart_reminder():
    chart = {"patient": {"patient_id": "abc-123", "name": "John Smith"}, "allergies": [], "medications": []}
    script = {"INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "Chart review.",
                                   "suggested_tool": "get_patient_chart"}],
              "TOOL_SELECT": [{"tool_name": "get_patient_chart"}, {"patient_id": "abc-123"}]}
    a, _, _ = agent(script, {"get_patient_chart": [{"result": chart}]})
    result = a.run_turn("Review the chart of abc-123")
    assert result.model_notice == "demo model: answers are not clinical advice"
    assert result.disclaimer and "verify" in result.disclaimer
    assert result.to_json()["model_notice"] == result.model_notice
    plain, _, _ = agent({"INTENT_CLASSIFY": [DIRECT], "SYNTHESIZE": ["Hello."]})
    assert plain.run_turn("Hello").disclaimer is None
    # a clinical profile loses the notice only once its file passed the site's acceptance run
    clinical = Agent(ScriptedModel({"INTENT_CLASSIFY": [DIRECT], "SYNTHESIZE": ["Hello."]}),
                     ScriptedToolBox({}, None, []), Settings(model="medgemma-1.5-4b-it"), accepted=True)
    assert clinical.run_turn("Hello").model_notice is None
    unaccepted = Agent(ScriptedModel({"INTENT_CLASSIFY": [DIRECT], "SYNTHESIZE": ["Hello."]}),
                       ScriptedToolBox({}, None, []), Settings(model="medgemma-1.5-4b-it"))
    assert "not validated for clinical use" in unaccepted.run_turn("Hello").model_notice
