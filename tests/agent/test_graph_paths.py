"""The graph with a scripted model: exact node paths (docs/design.md §2), and the §15
regression rows (no up-front plan, no LLM sufficiency or ask_user call, no leaked tool
names, no empty answer)."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import approve_all, deny_all
from appliance.tools.scripted import ScriptedToolBox
from mcp_servers.contracts import TOOL_LABELS
from tests.agent.helpers import approve_as_override

IA, IC, TS, TE, RC, DR, EH, SY = (
    "INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE",
    "RESULT_CLASSIFY", "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "SYNTHESIZE",
)
TOOL_LOOP = [TS, TE, RC, DR]
DRUGS = ["dofetilide", "warfarin", "aspirin", "ibuprofen", "metformin", "amiodarone", "amoxicillin"]
SAFETY = {"drug": "dofetilide", "boxed_warning": "Torsade de pointes risk; start with continuous ECG monitoring."}
ONE = {"total_matches": 1, "matches": [{"patient_id": "pat-002", "name": "Maria Garcia", "birth_date": "1971-03-09", "sex": "female"}]}
THREE = {"total_matches": 3, "matches": [
    {"patient_id": f"pat-01{i}", "name": "James Wilson", "birth_date": f"19{40 + 10 * i}-06-01", "sex": "male"} for i in range(3)
]}


def intent(tool=None):
    if tool is None:
        return {"intent": "DIRECT", "task_summary": "General question.", "suggested_tool": None}
    return {"intent": "TOOL_NEEDED", "task_summary": "Clinician needs a lookup.", "suggested_tool": tool}


def good(summary="Data returned."):
    return {"quality": "success_rich", "brief_summary": summary}


def run(query, script, tools=None, approver=deny_all, **kw):
    model = ScriptedModel(script)
    toolbox = ScriptedToolBox(tools or {}, fallback=None, drug_names=DRUGS)
    agent = Agent(model, toolbox, Settings(), approver)
    result = agent.run_turn(query, **kw)
    assert model.pending() == {}, f"unused scripted replies: {model.pending()}"
    return result, model, toolbox


def test_direct():
    result, model, toolbox = run("What is hypertension?", {IC: [intent()], SY: ["Hypertension is persistently raised blood pressure."]})
    assert result.path == [IA, IC, SY]
    assert result.intent == "DIRECT" and toolbox.calls == []
    assert [c.node for c in model.history] == [IC, SY]
    assert model.history[0].temperature == 0.0 and model.history[1].temperature == 0.5
    assert model.history[1].max_tokens == 256


def test_single_tool():
    # A look-up code reads in the words: code routes it, labels the result and answers from it.
    result, model, toolbox = run("Check FDA warnings for dofetilide", {}, {"check_drug_safety": [{"result": SAFETY}]})
    assert result.path == [IA, IC, *TOOL_LOOP, SY]
    assert toolbox.calls == [("check_drug_safety", {"drug_name": "dofetilide"})]
    assert result.tool_calls[0]["classification"] == "success_rich"
    assert model.history == []  # no model call: not for the intent, the tool, the label or the answer
    assert "Boxed warning: Torsade de pointes risk" in result.response
    assert "check_drug_safety" not in result.response


def test_single_tool_the_model_routes():
    # A request code cannot read (no drug it knows) is still the model's to route.
    result, model, toolbox = run(
        "Check FDA warnings for the new antiarrhythmic",
        {IC: [intent("check_drug_safety")], TS: [{"tool_name": "check_drug_safety"}, {"drug_name": "dofetilide"}]},
        {"check_drug_safety": [{"result": SAFETY}]},
    )
    assert result.path == [IA, IC, *TOOL_LOOP, SY]
    stage2 = model.history[2]
    assert stage2.schema == "DrugSafetyArgs"
    assert [c.node for c in model.history] == [IC, TS, TS]  # the label and the answer are code's


def test_multi_tool_two_steps_passes_the_found_patient_id():
    result, model, toolbox = run(
        "Find patient Maria Garcia and check her chart",
        {IC: [intent("search_patient")]},  # the search for the one name read, and the chart: code's calls
        {"search_patient": [{"result": ONE}], "get_patient_chart": [{"result": {"patient_id": "pat-002", "problems": ["Hypertension"]}}]},
    )
    assert result.path == [IA, IC, *TOOL_LOOP, *TOOL_LOOP, SY]
    assert toolbox.calls == [("search_patient", {"name": "Maria Garcia"}), ("get_patient_chart", {"patient_id": "pat-002"})]
    # The one patient found is code's to pass on: the chart call is code's, no model is asked for it.
    assert not [c for c in model.history if c.schema == "PatientChartArgs"]
    search_select = [e for e in result.trace if e.node == TS][0]
    assert search_select.output["by"] == "code" and search_select.args == {"name": "Maria Garcia"}
    chart_select = [e for e in result.trace if e.node == TS][1]
    assert chart_select.output["by"] == "code" and chart_select.args == {"patient_id": "pat-002"}
    assert result.router[0]["next"] == TS and "get_patient_chart" in result.router[0]["reason"]


def test_multi_tool_three_steps():
    result, _, toolbox = run(
        "Find patient Maria Garcia, check her chart, and verify metformin safety",
        {IC: [intent("search_patient")]},  # the search, the chart and the safety look-up: code's
        {"search_patient": [{"result": ONE}], "get_patient_chart": [{"result": {"problems": ["CKD"]}}],
         "check_drug_safety": [{"result": {"boxed_warning": "Lactic acidosis."}}]},
    )
    assert result.path == [IA, IC, *TOOL_LOOP * 3, SY]
    assert len(toolbox.calls) == 3


def test_error_retry_same_then_success():
    result, model, toolbox = run(
        "Check FDA warnings for amiodarone",
        {EH: [{"strategy": "retry_same", "reasoning": "temporary"}]},
        {"check_drug_safety": [{"error_type": "timeout", "message": "late"}, {"result": {"boxed_warning": "Pulmonary toxicity."}}]},
    )
    assert result.path == [IA, IC, *TOOL_LOOP, EH, *TOOL_LOOP, SY]
    assert toolbox.calls == [("check_drug_safety", {"drug_name": "amiodarone"})] * 2
    assert [c.node for c in model.history] == [EH]  # the retry's mode is the model's one choice
    assert "late" not in model.history[0].messages[-1].content  # raw error never reaches the model
    assert "Boxed warning: Pulmonary toxicity." in result.response and "late" not in result.response


def test_error_retry_different_args_reextracts():
    result, model, toolbox = run(
        "Find studies about metformin in kidney disease",
        {TS: [{"query": "metformin renal"}], EH: [{"strategy": "retry_different_args", "reasoning": "broaden"}]},
        {"search_medical_literature": [{"error_type": "server_error", "message": "none"}, {"result": {"articles": [{"title": "T"}]}}]},
    )
    assert result.path == [IA, IC, *TOOL_LOOP, EH, *TOOL_LOOP, SY]
    assert toolbox.calls[0][1] == {"query": "metformin kidney disease"}  # code's words first
    assert toolbox.calls[1][1] == {"query": "metformin renal"}  # then the model's, once, and the turn ends
    retry_prompt = [c for c in model.history if c.schema == "LiteratureSearchArgs"][0].messages[-1].content
    assert "Choose different arguments" in retry_prompt


def test_nothing_found_for_the_clinicians_own_words_is_the_answer_not_a_retry():
    result, model, toolbox = run(
        "any trials for lung cancer", {},
        {"find_clinical_trials": [{"error_type": "not_found",
                                   "message": "no trials for 'lung cancer' in the local trial cache (12 trials)"}]},
    )
    assert result.path == [IA, IC, *TOOL_LOOP, EH, SY] and model.history == []
    assert len(toolbox.calls) == 1
    assert result.response == "Clinical Trials: no trials for 'lung cancer' in the local trial cache (12 trials)."


def test_error_skip_drug_not_in_database():
    result, model, _ = run(
        "Check FDA warnings for zorblatin",
        {IC: [intent("check_drug_safety")], TS: [{"tool_name": "check_drug_safety"}, {"drug_name": "zorblatin"}]},
        {"check_drug_safety": [{"error_type": "drug_not_in_database", "message": "unknown"}]},
    )
    assert result.path == [IA, IC, *TOOL_LOOP, EH, SY]
    assert "ERROR_HANDLER" not in [c.node for c in model.history]  # skip is code's decision
    assert "zorblatin is not in this appliance's drug data" in result.response  # said plainly, never a guess
    assert "appliance knowledge import openfda FILE" in result.response
    assert "this does not mean it is safe" in result.response


def test_error_retries_exhausted_then_skip():
    result, _, toolbox = run(
        "Check FDA warnings for amiodarone",
        {EH: [{"strategy": "retry_same", "reasoning": None}] * 2},
        {"check_drug_safety": [{"error_type": "timeout", "message": "t"}] * 3},
    )
    assert result.path == [IA, IC, *TOOL_LOOP, EH, *TOOL_LOOP, EH, *TOOL_LOOP, EH, SY]
    assert len(toolbox.calls) == 3


def test_ask_user_on_three_matches_is_code_not_model():
    result, model, _ = run(
        "Search for patient James Wilson",
        {IC: [intent("search_patient")]},  # the search for the name read: code's
        {"search_patient": [{"result": THREE}]},
    )
    assert result.path == [IA, IC, *TOOL_LOOP, SY]
    assert result.kind == "clarification"
    assert result.response.startswith("I found 3 patients matching 'James Wilson'")
    assert all(f"pat-01{i}" in result.response for i in range(3))
    assert SY not in [c.node for c in model.history]  # the question is not generated by the model


def test_ask_user_on_missing_patient_id():
    result, model, toolbox = run(
        "Prescribe metformin 500 mg twice daily",
        {IC: [intent("prescribe_medication")],  # code reads the whole order: no model; the patient is asked for
         TS: []},
        approver=approve_all,
    )
    assert result.path == [IA, IC, *TOOL_LOOP, EH, SY]
    assert toolbox.calls == []  # an ID nobody gave never reaches a server
    assert result.tool_calls[0]["error_type"] == "missing_required_args"
    assert result.kind == "clarification"
    assert result.response == "I need a patient ID to proceed. Could you provide one?"


@pytest.mark.parametrize("query,unsaid", [
    ("Prescribe metformin 500mg for abc-123", "frequency"),  # docs/design.md §15's wording: no frequency given
    ("Prescribe metformin for abc-123 twice daily", "dosage"),
    ("Start something for abc-123: 500 mg twice daily", "medication name"),
])
def test_a_write_value_the_clinician_did_not_give_is_asked_for_not_invented(query, unsaid):
    # The grammar makes the model fill every field; code refuses values nobody said. Where the
    # order parser reads the drug, code chooses the tool and the model fills only the rest.
    choose = [] if "metformin" in query else [{"tool_name": "prescribe_medication"}]
    result, model, toolbox = run(
        query,
        {IC: [intent("prescribe_medication")],
         TS: [*choose,
              {"patient_id": "abc-123", "medication_name": "metformin", "dosage": "500 mg", "frequency": "twice daily", "notes": None}]},
        approver=approve_all,
    )
    assert result.path == [IA, IC, *TOOL_LOOP, EH, SY]
    assert toolbox.calls == []
    assert result.kind == "clarification"
    assert result.response == f"I need more information to complete this request: {unsaid}."


def test_write_values_from_the_recent_exchanges_count_as_given():
    result, _, toolbox = run(
        "twice daily",
        {IC: [intent("prescribe_medication")],
         TS: [{"tool_name": "prescribe_medication"},
              {"patient_id": "abc-123", "medication_name": "metformin", "dosage": "500 mg", "frequency": "twice daily", "notes": None}]},
        {"prescribe_medication": [{"result": {"id": 41, "status": "active"}}]},
        approver=approve_as_override, patient_id="abc-123",
        history=[("user", "Prescribe metformin 500mg for abc-123"),
                 ("assistant", "I need more information to complete this request: frequency.")],
    )
    assert [c[0] for c in toolbox.calls] == ["get_patient_chart", "prescribe_medication"]  # the safety gate read


def test_write_rejected_is_never_executed():
    result, _, toolbox = run(
        "Prescribe metformin 500mg twice daily for abc-123",
        {IC: [intent("prescribe_medication")],
         TS: []},  # the order is read in full from the words: code's call, no model
        approver=deny_all,
    )
    assert "did not approve the Prescription; nothing was written" in result.response
    assert result.path == [IA, IC, *TOOL_LOOP, EH, SY]
    assert [c[0] for c in toolbox.calls] == ["get_patient_chart"]  # the safety gate's read; no write
    assert result.tool_calls[0]["error_type"] == "rejected_by_user"


def test_the_clinicians_reason_for_rejecting_reaches_synthesis():
    from appliance.tools.base import Approval

    result, model, toolbox = run(
        "Prescribe metformin 500mg twice daily for abc-123",
        {IC: [intent("prescribe_medication")],
         TS: []},  # the order is read in full from the words: code's call, no model
        approver=lambda tool, args, safety=None: Approval(False, args, "wrong patient"),
    )
    assert [c[0] for c in toolbox.calls] == ["get_patient_chart"]  # the safety gate's read; no write
    assert SY not in [c.node for c in model.history]  # code's words, at once
    assert "did not approve the Prescription; nothing was written. Reason given: wrong patient." in result.response


def test_write_approved_runs_once():
    result, _, toolbox = run(
        "Prescribe metformin 500mg twice daily for abc-123",
        {IC: [intent("prescribe_medication")],
         TS: []},  # the order is read in full from the words: code's call, no model
        {"prescribe_medication": [{"result": {"id": "54ab4be4-0c1d", "status": "active", "author": "drx"}}]},
        approver=approve_as_override,
    )
    assert result.path == [IA, IC, *TOOL_LOOP, SY]
    assert toolbox.calls[0][1]["patient_id"] == "abc-123"
    # The answer says what was written in clinical words: no record dump, no row id, no author.
    assert result.response.startswith("Prescribed metformin 500mg twice daily")
    assert "54ab4be4" not in result.response and "drx" not in result.response and "Here is what" not in result.response


def test_step_limit_stops_the_loop():
    script = {IC: [intent("search_patient")], TS: []}
    args = {"search_patient": {"name": "Maria Garcia"}, "get_patient_chart": {"patient_id": "pat-002"},
            "check_drug_safety": {"drug_name": "metformin"}, "search_medical_literature": {"query": "metformin"}}
    for tool in ("check_drug_safety", "search_medical_literature"):
        # the search for the name and the chart of the one patient found are code's calls; the trials, named with no
        # condition code can read, leave the whole look-up to the model
        script[TS] += [{"tool_name": tool}, args[tool]]
    result, _, toolbox = run(
        "Find patient Maria Garcia, review her chart, check metformin safety, find studies and recruiting trials",
        script,
        {"search_patient": [{"result": ONE}], "get_patient_chart": [{"result": {"a": 1}}],
         "check_drug_safety": [{"result": {"a": 1}}], "search_medical_literature": [{"result": {"a": 1}}]},
    )
    assert result.path == [IA, IC, *TOOL_LOOP * 4, SY]
    assert "step limit" in result.router[-1]["reason"]


def test_no_upfront_plan_and_no_llm_sufficiency_or_ask_user_calls():
    result, model, _ = run(
        "Find patient Maria Garcia and check her chart",
        {IC: [intent("search_patient")]},  # the search for the name read, then the chart: code's calls
        {"search_patient": [{"result": ONE}], "get_patient_chart": [{"result": {"a": 1}}]},
    )
    schemas = [c.schema for c in model.history]
    assert set(schemas) <= {"IntentClassification", "ToolSelection", "NextToolSelection", "PatientSearchArgs",
                            "PatientChartArgs", "ResultAssessment", None}
    assert schemas.count("ToolSelection") + schemas.count("NextToolSelection") == 0  # code selected both steps


@pytest.mark.parametrize("raw,expected_absent", [
    ("Per [check_drug_safety], dofetilide needs ECG monitoring.", "check_drug_safety"),
    ("The get_patient_chart tool shows hypertension.", "get_patient_chart"),
    ("See check_drug_safety_info and xsearch_patient2 for more.", "check_drug_safety"),
])
def test_synthesis_never_leaks_tool_names(raw, expected_absent):
    result, _, _ = run("How is dofetilide started?", {IC: [intent()], SY: [raw]})
    assert expected_absent not in result.response
    assert not any(name in result.response for name in TOOL_LABELS)
    assert "Drug Safety Report" in result.response or "Patient Record" in result.response


@pytest.mark.parametrize("raw", [
    "Per [check_drug_safety], dofetilide needs ECG monitoring.",
    "See check_drug_safety_info and xsearch_patient2 for more.",
])
def test_streamed_pieces_never_leak_tool_names_and_add_up_to_the_answer(raw):
    pieces: list[str] = []
    result, _, _ = run("How is dofetilide started?", {IC: [intent()], SY: [raw]}, on_token=pieces.append)
    assert not any(name in piece for piece in pieces for name in TOOL_LABELS)
    assert "".join(pieces).strip() == result.response


def test_empty_synthesis_falls_back_to_findings(tmp_path):
    # The model still writes where code cannot read the result (an image's findings).
    from tests.llm.gguf_helpers import png

    image = tmp_path / "cxr.png"
    image.write_bytes(png(64, 64))
    findings = {"modality": "chest X-ray", "findings": ["right lower lobe opacity"], "confidence": "moderate"}
    result, _, _ = run("What does this chest X-ray show?",
                       {"IMAGE_ANALYSIS": [findings], IC: [intent("analyze_medical_image")],
                        TS: [{"tool_name": "analyze_medical_image"}, {"query": "What does this show?"}],
                        RC: [good()], SY: ["   "]}, image_path=str(image))
    assert result.response.strip()
    assert "right lower lobe opacity" in result.response
    assert result.trace[-1].output["fallback_used"] is True


def test_trace_has_one_event_per_node_with_labels_and_timings():
    result, _, _ = run("Check FDA warnings for dofetilide", {}, {"check_drug_safety": [{"result": SAFETY}]})
    assert [e.node for e in result.trace] == result.path
    assert all(e.label and e.seconds >= 0 for e in result.trace)
    execute = result.trace[3]
    assert execute.tool == "check_drug_safety" and execute.args == {"drug_name": "dofetilide"}
    router_event = result.trace[5]
    assert router_event.decision == SY and router_event.reason
    payload = result.to_json()
    assert set(payload) >= {"response", "path", "tool_calls", "router", "timings", "intent"}


def test_every_node_call_uses_seed_002_section_7_settings(tmp_path):
    # (node, schema) -> (temperature, max_tokens) as docs/design.md §7 gives them; a dictated
    # clinical note is the one documented exception (never cut: its schema's longest output).
    from appliance.llm.grammar import token_budget
    from mcp_servers.contracts import ARG_SCHEMAS

    expected = {
        (IC, "IntentClassification"): (0.0, 256), (TS, "ToolSelection"): (0.0, 64),
        (TS, "DrugSafetyArgs"): (0.0, 128), (RC, "ResultAssessment"): (0.0, 128),
        (EH, "RetryStrategy"): (0.0, 64), (SY, None): (0.5, 256),
    }
    from tests.llm.gguf_helpers import png

    _, model, _ = run(
        "Check FDA warnings for the new antiarrhythmic",  # no drug code reads: the model routes it
        {IC: [intent("check_drug_safety")], TS: [{"tool_name": "check_drug_safety"}, {"drug_name": "amiodarone"}],
         EH: [{"strategy": "retry_same", "reasoning": "temporary"}]},
        {"check_drug_safety": [{"error_type": "timeout", "message": "late"}, {"result": {"boxed_warning": "Pulmonary toxicity."}}]},
    )
    seen = {(c.node, c.schema): (c.temperature, c.max_tokens) for c in model.history}
    image = tmp_path / "cxr.png"  # the label and the free answer: only where code cannot read the result
    image.write_bytes(png(64, 64))
    _, model, _ = run("What does this chest X-ray show?",
                      {"IMAGE_ANALYSIS": [{"modality": "chest X-ray", "findings": ["opacity"], "confidence": "low"}],
                       IC: [intent("analyze_medical_image")],
                       TS: [{"tool_name": "analyze_medical_image"}, {"query": "What does this show?"}],
                       RC: [good()], SY: ["An opacity."]}, image_path=str(image))
    seen.update({(c.node, c.schema): (c.temperature, c.max_tokens) for c in model.history
                 if (c.node, c.schema) in expected})
    assert seen == expected
    note = ARG_SCHEMAS["save_clinical_note"]
    assert token_budget(note, 128, whole=True) > 1000  # the note's own bound, far above 128


def test_the_image_tool_answers_from_this_turns_image_analysis(tmp_path):
    from tests.llm.gguf_helpers import png

    image = tmp_path / "cxr.png"
    image.write_bytes(png(64, 64))
    findings = {"modality": "chest X-ray", "findings": ["right lower lobe opacity"], "confidence": "moderate"}
    script = {"IMAGE_ANALYSIS": [findings], IC: [intent("analyze_medical_image")],
              TS: [{"tool_name": "analyze_medical_image"}, {"query": "What does this show?"}],
              RC: [good()], SY: ["A right lower lobe opacity."]}
    result, model, toolbox = run("What does this chest X-ray show?", script, image_path=str(image))
    assert toolbox.calls == []  # answered in the agent from the analysis, not by a server
    assert result.tool_calls[0]["error_type"] is None
    assert "right lower lobe opacity" in model.history[-1].messages[-1].content


def test_the_image_tool_without_an_image_asks_for_one():
    result, _, _ = run(
        "Analyse the image",
        {IC: [intent("analyze_medical_image")], TS: [{"tool_name": "analyze_medical_image"}, {"query": "findings"}],
         RC: [{"quality": "error_fatal", "brief_summary": "No image."}]},
    )
    assert result.kind == "clarification"
    assert result.response == "I need more information to complete this request: an attached image."
