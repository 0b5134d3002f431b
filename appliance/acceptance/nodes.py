"""The agent's model calls on the acceptance set, one case at a time, through the nodes' own
``run`` functions (the prompts, schemas and limits the agent uses).

What is scored is the model's own answer: where code overrules a label (a write request made
TOOL_NEEDED, a failed call's quality) the model's label is the one scored, and a call code makes
without the model (the chart of a typed patient ID, a prescription read whole from the words)
is recorded ``by: code`` and left out of the model's figures, as is an argument row whose key
arguments are all values code fills in itself (the patient code settled on, what the order
parser read of a prescription: ``code_owned``). Each call's time is the node's.

Matching rule for arguments (``args_match``): every key argument of the case must match; IDs
and enums exactly (case-insensitively); text when the expected words occur in order in the
answer, as whole words (case, punctuation and spacing ignored); a list as a set of such texts.

Invariant: a call that fails (``GenerationError``) is recorded invalid and wrong; the run goes on.
"""

from __future__ import annotations

import re
import time

from appliance.acceptance.cases import Case
from appliance.agent.nodes import (
    error_handler,
    intent_classify,
    result_classify,
    tool_select,
)
from appliance.agent.nodes.router import Limits
from appliance.agent.order_calls import prescription_from_words
from appliance.agent.reading.request import extract_entities
from appliance.agent.settled_patient import code_patient
from appliance.agent.state import AgentState, ToolResult
from appliance.errors import GenerationCancelled, GenerationError
from appliance.llm.base import LanguageModel
from appliance.medication.names import DrugRecogniser
from mcp_servers.contracts import PRESCRIBE, TOOL_LABELS

TASK_SUMMARY = "Clinician request."  # the neutral framing test_production_model's rows use
EXACT_ARGS = frozenset({"patient_id", "nct_id", "note_type", "severity", "status", "phase", "sex", "study_type"})


def _words(value) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", str(value).lower()))


def _text_match(expected, actual) -> bool:
    want, got = _words(expected), _words(actual)
    return bool(want) and f" {want} " in f" {got} "


def args_match(expected: dict, actual: dict | None) -> bool:
    """The case's key arguments against the call's (the module docstring states the rule)."""
    if not isinstance(actual, dict):
        return False
    for key, want in expected.items():
        got = actual.get(key)
        if isinstance(want, list):
            if not isinstance(got, list) or len(got) != len(want):
                return False
            if not all(any(_text_match(w, g) for g in got) for w in want):
                return False
        elif key in EXACT_ARGS:
            if _words(got) != _words(want):
                return False
        elif not _text_match(want, got):
            return False
    return True


def _state(case: Case, drugs: DrugRecogniser, **kw) -> AgentState:
    return AgentState(user_query=case.request, selected_patient_id=case.open_patient,
                      extracted_entities=extract_entities(case.request, drugs, has_image=case.image), **kw)


def _timed(fn):
    started = time.perf_counter()
    try:
        return fn(), None, round(time.perf_counter() - started, 4)
    except GenerationCancelled:
        raise
    except GenerationError as exc:
        return None, f"{type(exc).__name__}: {exc}", round(time.perf_counter() - started, 4)


def _record(expected, got, correct: bool, error: str | None, seconds: float, by: str = "model") -> dict:
    return {"expected": expected, "got": got, "correct": bool(correct) and error is None, "valid": error is None,
            "error": error, "seconds": seconds if by != "code" else None, "by": by}


def _intent(case: Case, model: LanguageModel, drugs: DrugRecogniser) -> dict:
    out, error, seconds = _timed(lambda: intent_classify.run(_state(case, drugs), model).output)
    said = (out or {}).get("model_said") or out or {}
    got = {"intent": said.get("intent"), "suggested_tool": said.get("suggested_tool")}
    right = got["intent"] == case.intent and (case.suggested_tool is None or got["suggested_tool"] == case.suggested_tool)
    by = "code" if (out or {}).get("by") == "code" else "model"  # a chart question code routes is not the model's
    return _record({"intent": case.intent, "suggested_tool": case.suggested_tool}, got, right, error, seconds, by)


def _tools(case: Case, model: LanguageModel, drugs: DrugRecogniser) -> dict[str, dict]:
    state = _state(case, drugs, task_summary=TASK_SUMMARY)
    out, error, seconds = _timed(lambda: tool_select.run(state, model, drugs).output)
    out = out or {}
    by = {"code": "code", "code and model": "code"}.get(out.get("by"), "model")  # stage 1 only
    records = {"tool": _record(case.tool, out.get("tool_name"), out.get("tool_name") == case.tool, error, seconds, by)}
    if case.args is None:
        return records
    if error is None and out.get("tool_name") == case.tool:  # timed with the tool; code's call stays code's
        args, args_error, args_seconds, args_by = out.get("args"), None, None, by if out.get("by") == "code" else "model"
    else:  # stage 2 for the right tool, as a retry with different arguments runs it
        retry = _state(case, drugs, task_summary=TASK_SUMMARY, current_tool=case.tool, current_args={},
                       retry_mode="retry_different_args")
        got, args_error, args_seconds = _timed(lambda: tool_select.run(retry, model, drugs).output)
        args, args_by = (got or {}).get("args"), "model"
    if set(case.args) <= code_owned(state, case.tool, drugs):
        args_by = "code"  # every key argument is one code fills in whatever the model says
    records["arguments"] = _record(case.args, args, args_match(case.args, args), args_error, args_seconds, args_by)
    return records


def code_owned(state: AgentState, tool: str, drugs: DrugRecogniser) -> set[str]:
    """The arguments code puts in this call itself (``tool_select._owned``): the patient code
    settled on, and what the order parser read of a prescription."""
    owned = {"patient_id"} if code_patient(state) else set()
    if tool == PRESCRIBE:
        read = prescription_from_words(state, drugs)
        owned |= {k for k, v in (read[0] if read else {}).items() if v}
    return owned


def _finished(case: Case) -> ToolResult:
    r = case.result
    failed = r["error_type"] is not None
    return ToolResult(r["tool"], TOOL_LABELS[r["tool"]], {}, None if failed else {"data": True}, r["text"],
                      error=r["text"] if failed else None, error_type=r["error_type"])


def _result(case: Case, model: LanguageModel, drugs: DrugRecogniser) -> dict:
    state = _state(case, drugs, task_summary=TASK_SUMMARY, tool_results=(_finished(case),))
    out, error, seconds = _timed(lambda: result_classify.run(state, model).output)
    got = (out or {}).get("model_said") or (out or {}).get("quality")
    by = "code" if (out or {}).get("by") == "code" else "model"  # a result code reads is labelled by code
    return _record(case.result["quality"], got, got == case.result["quality"], error, seconds, by)


def _retry(case: Case, model: LanguageModel, drugs: DrugRecogniser) -> dict:
    state = _state(case, drugs, tool_results=(_finished(case),), last_result_classification=case.result["quality"],
                   current_tool=case.result["tool"], current_args={})
    out, error, seconds = _timed(lambda: error_handler.run(state, model, Limits()).output)
    got = (out or {}).get("strategy")
    return _record(case.retry, got, got == case.retry, error, seconds)


def run_case(case: Case, model: LanguageModel, drugs: DrugRecogniser) -> dict:
    """One line of ``nodes.jsonl``: each node the case tests, with the model's answer."""
    nodes: dict[str, dict] = {}
    if case.intent is not None:
        nodes["intent"] = _intent(case, model, drugs)
    if case.tool is not None:
        nodes.update(_tools(case, model, drugs))
    if case.result is not None:
        nodes["result"] = _result(case, model, drugs)
    if case.retry is not None:
        nodes["retry"] = _retry(case, model, drugs)
    return {"id": case.id, "source": case.source, "nodes": nodes}

