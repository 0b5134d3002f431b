"""Node 3, TOOL_SELECT (LLM, T=0.0), two stages (docs/design.md §4.3):

1. the tool name, from every tool's full description with one example request each (in name
   order: no tool comes first by design), plus the example of INTENT_CLASSIFY's suggestion
   when there is one. The request is shown without its dictated text
   (the reading's ``instruction``): a note's words do not choose the tool;
2. that tool's arguments, with deterministic entity hints injected.

Retries are code's decision: ``retry_same`` reuses the last call without any model call;
``retry_different_args`` keeps the tool and re-extracts arguments knowing what failed.
On re-entry after a successful step the model may answer "none"; the router checks it.

Code owns what code can read (``settled_patient``, ``order_calls``): when the next step the
request names is the search for the one patient the words name ("Aisha Patel's labs"), the
chart of the patient code settled on, or a prescription whose drug, dose
and frequency the order parser reads from the clinician's words, code makes the call and no
model is asked; where the parser found only part of an order, the model's arguments fill the
rest and code's values replace the model's. Every call's patient is code's
(``settled_patient.code_patient``) whenever code has one, so a model-made ID ("006") never
reaches a tool.
"""

from __future__ import annotations

import json

from appliance.agent.knowledge_requests import next_call
from appliance.agent.nodes.prompting import (
    PROMPT_TOOLS,
    TOOL_EXAMPLES,
    conversation,
    shortenable,
)
from appliance.agent.order_calls import ORDER_TOOLS, order_call, prescription_from_words
from appliance.agent.progress import steps_not_done
from appliance.agent.reading.request import reading_of
from appliance.agent.reading.write_requests import PRESCRIBE
from appliance.agent.schemas import NextToolSelection, ToolSelection
from appliance.agent.settled_patient import code_patient
from appliance.agent.state import AgentState, Node, NodeResult
from appliance.errors import ConstrainedOutputInvalid
from appliance.llm.base import LanguageModel
from appliance.llm.grammar import token_budget
from appliance.medication.names import DrugRecogniser
from mcp_servers.contracts import (
    ARG_SCHEMAS,
    FULL_DESCRIPTIONS,
    TOOL_LABELS,
    TOOLS,
    ToolSet,
)

TEMPERATURE = 0.0
STAGE1_MAX_TOKENS = token_budget(NextToolSelection, 64)
STAGE2_SEED_MAX_TOKENS = 128
UNCUT_TOOLS = ToolSet(lambda tool: tool.dictated)  # on the record: a dictated note is never cut to fit 128 tokens

_TOOL_LIST = "\n".join(f'- {FULL_DESCRIPTIONS[name]} Example: "{TOOL_EXAMPLES[name]}"' for name in PROMPT_TOOLS)

STAGE1_PROMPT = f"""You route a clinician's request to one tool. Choose the single most appropriate tool for the next step.

Available tools, each with an example request:
{_TOOL_LIST}

Answer with JSON only."""

STAGE1_NEXT_SUFFIX = '\nIf the results so far already cover the request, answer "none".'

STAGE2_PROMPT = """Extract the arguments for one tool call from the clinician's request. Use only information given in the request, the detected values, or earlier results. Answer with JSON only."""


def _example(state: AgentState) -> list[str]:
    """The example of the tool INTENT_CLASSIFY suggested; none (never a default) without one."""
    tool = state.suggested_tool
    if tool not in TOOL_EXAMPLES:
        return []
    return [f'Example:\nRequest: "{TOOL_EXAMPLES[tool]}"\nAnswer: {{"tool_name":"{tool}"}}']


def results_context(state: AgentState) -> str:
    """Earlier results of this turn, with clinical labels only."""
    lines = []
    for r in state.tool_results:
        lines.append(r.error if r.error else r.formatted_result)
    return "\n".join(lines)



def entity_hints(state: AgentState) -> list[str]:
    """Deterministic hints (docs/design.md §4.3): regex/dictionary finds and unambiguous earlier results."""
    e = state.extracted_entities
    hints = [f"Detected patient ID: {pid}" for pid in e.patient_ids]
    if state.selected_patient_id and state.selected_patient_id not in e.patient_ids:
        hints.append(f"Patient currently open: {state.selected_patient_id}")
    for r in state.tool_results:
        if r.tool_name == "search_patient" and r.result and r.result.get("total_matches") == 1:
            match = r.result["matches"][0]
            hints.append(f"Patient ID found by the search: {match['patient_id']}")
    hints += [f"Detected patient name: {n}" for n in e.patient_names]
    hints += [f"Detected drug name: {d}" for d in e.drug_mentions]
    return hints


def _stage1(state: AgentState, model: LanguageModel) -> str:
    reentry = bool(state.tool_results) and not state.strict_selection
    schema = NextToolSelection if reentry else ToolSelection
    system = STAGE1_PROMPT + (STAGE1_NEXT_SUFFIX if reentry else "")
    parts = [*_example(state), f"Request: {reading_of(state).instruction}", f"Clinical context: {state.task_summary}"]
    if state.tool_results:
        parts.append("Results so far:\n" + results_context(state))
    out = model.generate_constrained(
        Node.TOOL_SELECT, conversation(system, "\n\n".join(parts), results=shortenable(state.tool_results)), schema,
        temperature=TEMPERATURE, max_tokens=STAGE1_MAX_TOKENS,
    )
    return out.tool_name


def _stage2(state: AgentState, model: LanguageModel, tool: str, failure: str | None) -> dict:
    schema = ARG_SCHEMAS[tool]
    parts = [f"Tool: {tool}\nDescription: {FULL_DESCRIPTIONS[tool]}", f"Request: {state.user_query}"]
    hints = entity_hints(state)
    if hints:
        parts.append("\n".join(hints))
    if state.tool_results:
        parts.append("Results so far:\n" + results_context(state))
    if failure:
        parts.append(f"The previous arguments {failure}. Choose different arguments.")
    try:
        out = model.generate_constrained(
            Node.TOOL_SELECT,
            conversation(STAGE2_PROMPT, "\n\n".join(parts), state.conversation_history,
                         results=shortenable(state.tool_results)),
            schema,
            temperature=TEMPERATURE, max_tokens=token_budget(schema, STAGE2_SEED_MAX_TOKENS, whole=tool in UNCUT_TOOLS),
        )
    except ConstrainedOutputInvalid:  # the schema's own words ("...Args: patient_id: Field required") are not the user's
        raise ConstrainedOutputInvalid(f"the {TOOL_LABELS[tool]} request could not be read in full (a detail it needs, "
                                       "such as the patient, the drug, the dose or how often, is missing or "
                                       "unreadable); nothing was done: say it again with each detail") from None
    return out.model_dump()


def _owned(state: AgentState, tool: str, args: dict, drugs: DrugRecogniser | None) -> dict:
    """The model's arguments with code's values in their place: the patient code settled on,
    and for a prescription what the order parser read from the clinician's words."""
    args = dict(args)
    patient = code_patient(state)
    if patient and TOOLS[tool].needs_patient:
        args["patient_id"] = patient
    if tool == PRESCRIBE and drugs is not None:
        read = prescription_from_words(state, drugs)
        if read is not None:
            args.update(read[0])
    return args


def _code_call(state: AgentState, drugs: DrugRecogniser | None) -> tuple[str, dict, bool, str] | None:
    """(tool, arguments, complete, why) when code can make the next call the request names:
    the chart of the patient code settled on, or a prescription whose drug the order parser
    reads (complete when dose and frequency are read too). None: the model chooses."""
    pending = steps_not_done(state)
    knowledge = next_call(state, tuple(s.tool for s in pending))
    if knowledge is not None:  # a look-up whose arguments code read in the words (knowledge_requests)
        return knowledge.tool, dict(knowledge.args), True, knowledge.why
    if not pending:
        return None
    tool = pending[0].tool
    names = state.extracted_entities.patient_names
    if tool == "search_patient" and len(names) == 1 and not any(r.tool_name == tool for r in state.tool_results):
        return tool, {"name": names[0]}, True, "the clinician named the patient"
    patient = code_patient(state)
    if tool == "get_patient_chart" and patient and not any(r.tool_name == tool for r in state.tool_results):
        return tool, {"patient_id": patient}, True, "the clinician asked about this patient's chart"
    if tool not in ORDER_TOOLS or drugs is None or any(r.tool_name == tool for r in state.tool_results):
        return None
    return order_call(state, tool, drugs)


def run(state: AgentState, model: LanguageModel, drugs: DrugRecogniser | None = None) -> NodeResult:
    """The next call; next TOOL_EXECUTE, or the router when the model answered "none".
    ``drugs`` (the turn's recogniser) lets code read a prescription from the words."""
    if state.retry_mode == "retry_same" and state.current_tool:
        output = {"tool_name": state.current_tool, "args": state.current_args, "retry": "retry_same"}
        return _selected({"retry_mode": None}, output, model_call=False)
    if state.retry_mode == "retry_different_args" and state.current_tool:
        last = state.last_tool_result
        failure = f"{json.dumps(state.current_args)} gave: {last.error}" if last else None
        args = _owned(state, state.current_tool, _stage2(state, model, state.current_tool, failure), drugs)
        output = {"tool_name": state.current_tool, "args": args, "retry": "retry_different_args"}
        return _selected({"retry_mode": None, "current_args": args}, output)
    code = _code_call(state, drugs)
    if code is not None and code[2]:
        tool, args, _complete, why = code
        update = {"current_tool": tool, "current_args": args, "strict_selection": False}
        output = {"tool_name": tool, "label": TOOL_LABELS[tool], "args": args, "by": "code", "reason": why}
        return _selected(update, output, model_call=False)
    tool = code[0] if code is not None else _stage1(state, model)
    if tool == "none":
        return _selected({"current_tool": "none", "current_args": None}, {"tool_name": "none"})
    args = _owned(state, tool, _stage2(state, model, tool, None), drugs)
    update = {"current_tool": tool, "current_args": args, "strict_selection": False}
    output = {"tool_name": tool, "label": TOOL_LABELS[tool], "args": args}
    if code is not None:
        output["by"] = "code and model"
    return _selected(update, output)


def _selected(update: dict, output: dict, *, model_call: bool = True) -> NodeResult:
    nxt = Node.DETERMINISTIC_ROUTER if output["tool_name"] == "none" else Node.TOOL_EXECUTE
    return NodeResult(update, output, nxt, model_call=model_call, tool=output["tool_name"], args=output.get("args"))
