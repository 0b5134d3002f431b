"""Patient IDs and the answer to "which one did you mean?":

- which words in a clinician's message are patient IDs (appliance/agent/reading/patient_refs.py's rule);
- which IDs every layer accepts (one rule: common/patient_ids.py), and that a recognised ID is
  always an accepted one;
- a patient ID the record refuses (unknown or malformed) is a question to the clinician;
- a reply to the several-matches question picks one candidate, grounded.
"""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.agent.nodes import input_assembly
from appliance.agent.nodes.error_handler import decide
from appliance.agent.nodes.router import (
    Limits,
    clarification_for_matches,
    required_tools,
)
from appliance.agent.nodes.tool_execute import validate_args
from appliance.agent.reading.patient_refs import (
    Candidate,
    candidates_in,
    choose,
    find_patient_ids,
    typed_ids,
)
from appliance.agent.reading.request import extract_entities
from appliance.agent.state import AgentState, ExtractedEntities, ToolResult
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.medication.names import DrugRecogniser
from appliance.tools.base import deny_all
from appliance.tools.scripted import ScriptedToolBox
from common.patient_ids import is_patient_id
from ehr_db import validation
from ehr_db.errors import InvalidField
from mcp_servers.contracts import TOOL_LABELS

# -- point 1: IDs in free text --------------------------------------------------------------
IDS_IN_TEXT = [
    # (message, the IDs found)
    ("Review the chart of pat-78234", ("pat-78234",)),
    ("compare pat-44201 with abc-123.", ("pat-44201", "abc-123")),
    ("Open PAT-00917 please", ("PAT-00917",)),
    ("what about (kln-5521)?", ("kln-5521",)),
    ("pat-78234's allergies", ("pat-78234",)),
    ("chart for site-204.b", ("site-204.b",)),
    ("Patient 7C9E6679-7425-40DE-944B-E07FC1F90AE7 today", ("7c9e6679-7425-40de-944b-e07fc1f90ae7",)),
    ("MRN 88123456 has a fever", ("88123456",)),
    ("mrn: 0042217", ("0042217",)),
    ("patient 5550123 needs a refill", ("5550123",)),
    ("pt #31337009", ("31337009",)),
    ("ID 70012345", ("70012345",)),
    ("look up #9081726", ("9081726",)),
    ("pat-78234 and again pat-78234", ("pat-78234",)),
    # not IDs
    ("Give 500mg twice-daily", ()),
    ("amoxicillin 2.5 mg/kg every 8 hours", ()),
    ("benzathine penicillin 2400000 units IM", ()),
    ("COVID-19 booster, IL-6 level, GLP-1 agonist, ICD-10 code", ()),
    ("x-ray at follow-up, non-smoker", ()),
    ("since 2019, weight 80512 g", ()),
    ("take 2 tablets", ()),
    ("patient 1234 is short", ()),  # fewer than 5 digits after a cue
    ("dose abc-123mg", ()),  # glued to a unit: not a standalone ID
    ("q-123 and t-1000", ()),  # a single letter before the dash
    ("ab-" + "1" * 70, ()),  # longer than 64 characters
]


@pytest.mark.parametrize("text,expected", IDS_IN_TEXT, ids=[t for t, _ in IDS_IN_TEXT])
def test_ids_in_free_text(text, expected):
    assert find_patient_ids(text) == expected
    assert extract_entities(text, DrugRecogniser()).patient_ids == expected
    assert all(is_patient_id(pid) for pid in expected)  # recognised implies accepted


ACCEPTED = [
    # (patient ID, accepted by every layer)
    ("abc-123", True), ("pat-78234", True), ("pat-44201", True), ("PAT-002", True),
    ("7c9e6679-7425-40de-944b-e07fc1f90ae7", True), ("88123456", True), ("example", True),
    ("a.b-c.1", True), ("x" * 64, True),
    ("x" * 65, False), ("pat 7", False), ("pat_7", False), ("pat/7", False), ("José-1", False), ("", False),
]


@pytest.mark.parametrize("pid,ok", ACCEPTED, ids=[p[:20] or "empty" for p, _ in ACCEPTED])
def test_every_layer_accepts_the_same_ids(pid, ok):
    assert is_patient_id(pid) is ok
    clean, error_type, fields = validate_args("get_patient_chart", {"patient_id": pid})  # the tool contract
    assert (clean == {"patient_id": pid}) is ok
    if not ok and pid:
        assert (error_type, fields) == ("invalid_args", ["patient_id"])
    if ok:
        assert validation.patient_id(pid) == pid  # the record's own check
    else:
        with pytest.raises(InvalidField):
            validation.patient_id(pid)


def test_a_patient_id_is_stripped_not_refused_for_spaces():
    assert validate_args("get_patient_chart", {"patient_id": "  pat-78234 "})[0] == {"patient_id": "pat-78234"}
    assert validation.patient_id(" pat-78234\n") == "pat-78234"


TYPED = [
    # (message, the words that ground a patient ID as typed by the clinician)
    ("Show the chart of pat-7.", {"pat-7"}),
    ("(PAT-002)'s labs", {"PAT-002"}),
    ("MRN 4412345", {"4412345"}),
    ("review the chart, please", set()),  # words without a digit never ground an ID
    ("pat 7", {"7"}),
]


@pytest.mark.parametrize("text,expected", TYPED, ids=[t for t, _ in TYPED])
def test_what_the_clinician_typed_grounds_a_patient_id(text, expected):
    assert typed_ids(text) == expected


OPEN_PATIENT = [
    # (message, the open/current patient, names found, IDs found, whether a search is required)
    ("How is patient Maria Garcia doing?", None, ("Maria Garcia",), (), True),
    ("How is patient Maria Garcia doing?", "abc-123", ("Maria Garcia",), (), True),  # a name outranks the open patient
    ("How is patient Maria Garcia doing? pat-001", "abc-123", ("Maria Garcia",), ("pat-001",), False),
    ("Pull up her chart", "pat-001", (), (), False),
]


@pytest.mark.parametrize("query,selected,names,ids,search", OPEN_PATIENT, ids=[f"{q}|{s}" for q, s, *_ in OPEN_PATIENT])
def test_the_open_patient_stands_in_for_a_search_only_when_no_patient_is_named(query, selected, names, ids, search):
    st = AgentState(user_query=query, selected_patient_id=selected,
                    extracted_entities=ExtractedEntities(patient_ids=ids, patient_names=names))
    assert ("search_patient" in required_tools(st)) is search


# -- point 2: a patient ID the record refuses is a question -----------------------------------
def _failed(error_type: str, pid: str, invalid=()) -> AgentState:
    tool = "get_patient_chart"
    result = ToolResult(tool, TOOL_LABELS[tool], {"patient_id": pid}, None, "x", error="x", error_type=error_type,
                        invalid_fields=tuple(invalid))
    return AgentState(user_query=f"Chart of {pid}", tool_results=(result,), step_count=1, current_tool=tool,
                      last_result_classification="error_fatal")


REFUSED = [
    # (error type, patient ID, invalid fields, action, words in the question)
    ("patient_not_found", "pat-7", (), "ask_user", "pat-7 is not a patient ID I know"),
    ("patient_not_found", "88123456", (), "ask_user", "Which patient did you mean?"),
    ("invalid_args", "pat 7", ("patient_id",), "ask_user", "'pat 7' is not a patient ID"),
    ("invalid_args", "x" * 80, ("patient_id",), "ask_user", "x" * 64 + "..."),
    ("invalid_args", "pat-7", ("note_type",), "llm_retry", None),  # another field: the model may fix it
    ("not_found", "pat-7", (), "llm_retry", None),
]


@pytest.mark.parametrize("etype,pid,invalid,action,words", REFUSED, ids=[f"{r[0]}-{r[1][:8]}-{r[2]}" for r in REFUSED])
def test_a_refused_patient_id_is_asked_about(etype, pid, invalid, action, words):
    decision = decide(_failed(etype, pid, invalid), Limits())
    assert decision.action == action
    if words:
        assert words in decision.message


IA, IC, TS, TE, RC, DR, EH, SY = (
    "INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE",
    "RESULT_CLASSIFY", "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "SYNTHESIZE",
)
LOOP = [TS, TE, RC, DR]
CHART_INTENT = {"intent": "TOOL_NEEDED", "task_summary": "Chart review.", "suggested_tool": "get_patient_chart"}
BAD = {"quality": "error_fatal", "brief_summary": "The record refused."}
GOOD = {"quality": "success_rich", "brief_summary": "Chart returned."}


def _turn(query, script, tools=None, history=None):
    model = ScriptedModel(script)
    toolbox = ScriptedToolBox(tools or {}, fallback=None, drug_names=[])
    result = Agent(model, toolbox, Settings(), deny_all).run_turn(query, history=history)
    assert model.pending() == {}, model.pending()
    return result, model, toolbox


TURNS = [
    # (query, the model's patient ID, scripted outcome (None: no call), calls, words in the question)
    ("Show the chart of pat-78234", "pat-78234", {"error_type": "patient_not_found", "message": "no such patient"},
     1, "pat-78234 is not a patient ID I know"),
    ("Show the chart of pat 7", "pat 7", None, 0, "'pat 7' is not a patient ID"),
    # too short to be recognised as an ID in text, but typed: grounded, and the record answers
    ("Show the chart of pat-7", "pat-7", {"error_type": "patient_not_found", "message": "no such patient"},
     1, "pat-7 is not a patient ID I know"),
]


@pytest.mark.parametrize("query,pid,outcome,calls,words", TURNS, ids=[t[0] for t in TURNS])
def test_the_turn_asks_instead_of_retrying_and_skipping(query, pid, outcome, calls, words):
    # An ID code recognises in the words is code's call to make (appliance.agent.settled_patient.code_patient),
    # and a chart question about that patient is routed by code too: the model is asked for the
    # intent and the call only when code has no patient.
    recognised = bool(find_patient_ids(query))
    select = [] if recognised else [{"tool_name": "get_patient_chart"}, {"patient_id": pid}]
    result, model, toolbox = _turn(
        query, {IC: [] if recognised else [CHART_INTENT], TS: select},
        {"get_patient_chart": [outcome]} if outcome else None)
    assert result.path == [IA, IC, *LOOP, EH, SY]
    assert len(toolbox.calls) == calls
    assert result.kind == "clarification" and words in result.response
    assert EH not in [c.node for c in model.history]  # asking is code's decision, not a retry


# -- point 3: the answer to "which one did you mean?" ---------------------------------------
WILSONS = {"total_matches": 3, "matches": [
    {"patient_id": "pat-002", "name": "James Wilson", "birth_date": "1948-11-02"},
    {"patient_id": "pat-003", "name": "James Wilson", "birth_date": "1967-04-19"},
    {"patient_id": "pat-004", "name": "James Wilson", "birth_date": "1990-07-30"},
]}
MIXED = {"total_matches": 2, "matches": [
    {"patient_id": "kln-5521", "name": "Anna Novak", "birth_date": "1971-02-03"},
    {"patient_id": "kln-5522", "name": "Peter Novak", "birth_date": None},
]}
QUESTION = clarification_for_matches(WILSONS, "James Wilson")
MIXED_QUESTION = clarification_for_matches(MIXED, "Novak")

CHOICES = [
    # (question asked, the clinician's reply, the ID chosen or None)
    (QUESTION, "the second one", "pat-003"),
    (QUESTION, "2", "pat-003"),
    (QUESTION, "Number 1 please", "pat-002"),
    (QUESTION, "#3", "pat-004"),
    (QUESTION, "the 3rd", "pat-004"),
    (QUESTION, "The last one, pull up his chart", "pat-004"),
    (QUESTION, "the one born in 1967", "pat-003"),
    (QUESTION, "the 1948 one", "pat-002"),
    (QUESTION, "born 1990-07-30", "pat-004"),
    (QUESTION, "James Wilson, the first one", "pat-002"),
    (QUESTION, "the second, born 1967", "pat-003"),
    (MIXED_QUESTION, "Peter", "kln-5522"),
    (MIXED_QUESTION, "anna novak", "kln-5521"),
    (MIXED_QUESTION, "the one born 1971", "kln-5521"),
    # no single candidate: the question comes again
    (QUESTION, "James Wilson", None),  # the name does not tell them apart
    (QUESTION, "the first one, born 1967", None),  # cues disagree
    (QUESTION, "the fourth one", None),  # no fourth candidate
    (QUESTION, "the one born 1975", None),
    (QUESTION, "not the first, the second", None),  # two positions
    (QUESTION, "what is hypertension?", None),  # not an answer
    (QUESTION, "pat-003", None),  # an ID speaks for itself (and is the clinician's own)
    (MIXED_QUESTION, "Novak", None),
    ("What is hypertension?\n- Hypertension, born 1948-11-02, ID pat-002\n- x, born y, ID pat-003", "2", None),  # no question
    ("Which one?\n- James Wilson, born 1948-11-02, ID pat-002", "1", None),  # one line is no choice
    (QUESTION + "\nI hope that helps.", "2", None),  # not code's whole question
]


@pytest.mark.parametrize("question,reply,expected", CHOICES, ids=[f"{c[1]}->{c[2]}" for c in CHOICES])
def test_the_reply_picks_one_candidate(question, reply, expected):
    picked = choose(reply, candidates_in(question))
    assert (picked[0].patient_id if picked else None) == expected


def test_the_question_the_router_writes_is_the_one_read_back():
    assert candidates_in(QUESTION) == tuple(Candidate(m["patient_id"], m["name"], m["birth_date"]) for m in WILSONS["matches"])
    assert candidates_in(MIXED_QUESTION)[1].birth_date is None  # written "born unknown"


@pytest.mark.parametrize("reply,pid", [("the second one", "pat-003"), ("the one born 1990", "pat-004")])
def test_input_assembly_takes_the_answer_as_the_turns_patient(reply, pid):
    history = [("user", "Search for patient James Wilson"), ("assistant", QUESTION)]
    done = input_assembly.run(AgentState(user_query=reply), DrugRecogniser(), history, 4)
    update, output = done.update, done.output
    assert update["extracted_entities"].patient_ids == (pid,)
    assert output["patient_choice"]["patient_id"] == pid
    # only right after the question
    done = input_assembly.run(AgentState(user_query=reply), DrugRecogniser(), history + [("user", "x"), ("assistant", "y")], 4)
    update, output = done.update, done.output
    assert update["extracted_entities"].patient_ids == () and "patient_choice" not in output


def test_the_chosen_candidate_is_grounded_and_read():
    history = [("user", "Search for patient James Wilson"), ("assistant", QUESTION)]
    result, model, toolbox = _turn(
        "the second one", {IC: [CHART_INTENT], TS: [{"tool_name": "get_patient_chart"}, {"patient_id": "pat-003"}],
                           },
        {"get_patient_chart": [{"result": {"patient": {"patient_id": "pat-003", "name": "James Wilson"}}}]},
        history=history)
    assert result.path == [IA, IC, *LOOP, SY] and result.kind == "answer"
    assert toolbox.calls == [("get_patient_chart", {"patient_id": "pat-003"})]
    stage2 = [c for c in model.history if c.schema == "PatientChartArgs"][0]
    assert "Detected patient ID: pat-003" in stage2.messages[-1].content


def test_a_reply_that_picks_nobody_grounds_nobody():
    history = [("user", "Search for patient James Wilson"), ("assistant", QUESTION)]
    result, _, toolbox = _turn(
        "the fourth one", {IC: [CHART_INTENT], TS: [{"tool_name": "get_patient_chart"}, {"patient_id": "pat-004"}]},
        history=history)
    assert toolbox.calls == [] and result.kind == "clarification"
    assert result.response == "I need a patient ID to proceed. Could you provide one?"
