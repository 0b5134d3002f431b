"""The clinician's request is read once per turn (docs/design.md §4.1, §5): every parse of the
message runs exactly once over a whole turn, whoever asks about the words afterwards.

The parse functions are counted by their code objects (``sys.setprofile``), so a call is
counted however the caller reaches the function: a node, the router, ``knowledge_requests`` or
one of the text-taking wrappers (``write_requests``, ``named_steps``, ...), which parse again
whatever they are given."""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from appliance.agent import knowledge_requests
from appliance.agent.graph import Agent
from appliance.agent.reading import (
    chart_topics,
    dictation,
    orders,
    patient_refs,
    request,
    task_patterns,
)
from appliance.agent.reading import write_requests as writes
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.scripted import ScriptedToolBox
from tests.agent.helpers import approve_as_override

IC, TS = "INTENT_CLASSIFY", "TOOL_SELECT"
DRUGS = ["dofetilide", "warfarin", "metformin", "amoxicillin"]
ONE = {"total_matches": 1, "matches": [{"patient_id": "pat-002", "name": "Maria Garcia", "birth_date": "1971-03-09"}]}
CHART = {"patient": {"patient_id": "pat-002", "name": "Maria Garcia"},
         "allergies": [{"substance": "penicillin", "reaction": "rash", "severity": "moderate"}],
         "medications": [], "problems": [{"display": "Hypertension"}]}

# Each parse of the message, and whether it is given the message as typed or its instruction.
PARSES = {
    "instruction": (dictation.read_instruction, "text"),
    "write requests": (writes.read_write_requests, "text"),
    "chart topics": (chart_topics.read_chart_topics, "instruction"),
    "named steps": (task_patterns.read_named_steps, "instruction"),
    "patient IDs in text": (patient_refs.find_patient_ids, "text"),
    "typed IDs": (patient_refs.typed_ids, "text"),
    "short IDs": (patient_refs.short_ids, "instruction"),
    "entities": (request.extract_entities, "text"),
    "prescription": (orders.read_prescribing_order, "text"),
    "order change": (orders.read_order_change, "instruction"),
    "misspelt drug": (orders.read_misspelt_drug, "instruction"),
    "knowledge look-ups": (knowledge_requests.read_request, "state"),
    "the whole reading": (request.read_words, "text"),
}

TURNS = {
    "chart question": ("Any allergies?", {}, {"get_patient_chart": [{"result": CHART}]}, {"patient_id": "pat-002"}),
    "order": ("Prescribe metformin 500mg twice daily for abc-123", {IC: [
        {"intent": "TOOL_NEEDED", "task_summary": "Prescribe.", "suggested_tool": "prescribe_medication"}]},
        {"prescribe_medication": [{"result": {"id": "54ab4be4-0c1d", "status": "active"}}]}, {}),
    "knowledge question": ("Check FDA warnings for dofetilide", {},
                           {"check_drug_safety": [{"result": {"drug": "dofetilide", "boxed_warning": "QT risk."}}]}, {}),
    "multi-step": ("Find patient Maria Garcia and check her chart",
                   {IC: [{"intent": "TOOL_NEEDED", "task_summary": "Chart.", "suggested_tool": "search_patient"}],
                    TS: [{"tool_name": "search_patient"}, {"name": "Maria Garcia"}]},
                   {"search_patient": [{"result": ONE}], "get_patient_chart": [{"result": CHART}]}, {}),
}


def _counted_turn(query: str, script: dict, tools: dict, kw: dict) -> tuple[Counter, object]:
    """Run one turn and count each parse's calls on this turn's message."""
    instruction = dictation.read_instruction(query)
    codes = {fn.__code__: (name, given) for name, (fn, given) in PARSES.items()}
    counts: Counter = Counter()

    def profile(frame, event, _arg):
        if event != "call" or frame.f_code not in codes:
            return
        name, given = codes[frame.f_code]
        first = frame.f_locals[frame.f_code.co_varnames[0]]
        if given == "state":
            first = first.user_query
        if first == (instruction if given == "instruction" else query):
            counts[name] += 1

    agent = Agent(ScriptedModel(script), ScriptedToolBox(tools, fallback=None, drug_names=DRUGS), Settings(),
                  approve_as_override)
    sys.setprofile(profile)
    try:
        result = agent.run_turn(query, **kw)
    finally:
        sys.setprofile(None)
    return counts, result


@pytest.mark.parametrize("kind", TURNS)
def test_each_parse_of_the_request_runs_exactly_once_per_turn(kind):
    query, script, tools, kw = TURNS[kind]
    counts, result = _counted_turn(query, script, tools, kw)
    assert len(result.path) > 3 and result.response  # a whole turn ran through the tool loop
    assert {name: counts[name] for name in PARSES} == dict.fromkeys(PARSES, 1)


def test_the_turn_reading_is_on_the_state_and_what_nodes_read():
    query, script, tools, kw = TURNS["multi-step"]
    _, result = _counted_turn(query, script, tools, kw)
    reading = result.state.reading
    assert reading.text == query and [s.tool for s in reading.steps] == ["search_patient", "get_patient_chart"]
    assert reading.writes == () and reading.order is None
    with pytest.raises(AttributeError):
        reading.writes = ("prescribe_medication",)  # frozen: no node changes what was read


def test_the_text_taking_wrappers_parse_the_words_they_are_given():
    # For callers outside a turn (the acceptance run's oracle, tests); in a turn nothing calls them.
    assert writes.write_requests("Prescribe amoxicillin 500 mg TID") == ("prescribe_medication",)
    assert task_patterns.named_steps("check his chart")[0].tool == "get_patient_chart"
