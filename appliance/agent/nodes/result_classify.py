"""Node 5, RESULT_CLASSIFY (LLM, T=0.0): what happened, never what to do next (docs/design.md §4.5).

Code labels every result it can read (``code_assessment``) with no model call: a failed call by
its error type (temporary or permanent), a call that answered by whether it found anything. Only
an image analysis is labelled by the model; there too a failed call keeps code's label, so the
trace never reads "found results" after an error (the model's label stays in the details).
"""

from __future__ import annotations

from appliance.agent.nodes.prompting import conversation, shortenable
from appliance.agent.schemas import ResultAssessment
from appliance.agent.state import AgentState, Node, NodeResult
from appliance.agent.tool_results import summarize_result
from appliance.llm.base import LanguageModel
from appliance.llm.grammar import token_budget

SCHEMA = ResultAssessment
TEMPERATURE = 0.0
MAX_TOKENS = token_budget(SCHEMA, 128)

SYSTEM_PROMPT = """You assess one result returned to a clinical assistant. Classify its quality:
- success_rich: complete, usable data that answers the question
- success_partial: some data, but it may not fully answer the question
- no_results: the source worked but found nothing
- error_retryable: a temporary failure (unavailable, busy, timed out)
- error_fatal: a permanent failure (bad or missing details, not found, not approved)
Then summarise what was returned in one or two sentences. Answer with JSON only."""


# Failures a retry may cure; every other error type is permanent for this request.
TEMPORARY_ERRORS = frozenset({"timeout", "rate_limit", "server_error", "service_unavailable", "invalid_response"})


# Results code reads whole; only an image analysis's findings are left to the model's label.
MODEL_LABELLED = frozenset({"analyze_medical_image"})


def code_assessment(last) -> tuple[str, str] | None:
    """(quality, summary) for a result code can read, or None: a failed call is temporary or
    permanent by its error type; a call that answered is ``no_results`` when it found nothing
    (no match, no article, no trial) and ``success_rich`` otherwise. No model call."""
    if last is None or last.tool_name in MODEL_LABELLED:
        return None
    if last.error_type is not None:
        quality = "error_retryable" if last.error_type in TEMPORARY_ERRORS else "error_fatal"
        return quality, (last.error or f"The {last.tool_label} could not be completed.")[:200]
    found = last.result if isinstance(last.result, dict) else {}
    empty = found.get("total_matches") == 0 or found.get("count") == 0 or (
        "trials" in found and not found["trials"] and last.tool_name != "prescreen_for_trials")
    quality = "no_results" if empty or not found else "success_rich"
    return quality, f"{last.tool_label}: {summarize_result(found)}"[:200]


def run(state: AgentState, model: LanguageModel) -> NodeResult:
    """The last result's label (code's where code can read it); next the router."""
    last = state.last_tool_result
    coded = code_assessment(last)
    if coded is not None:
        quality, summary = coded
        update = {"last_result_classification": quality, "last_result_summary": summary}
        return NodeResult(update, {"quality": quality, "brief_summary": summary, "by": "code"},
                          Node.DETERMINISTIC_ROUTER, model_call=False)
    user = (
        f"Clinician's question: {state.user_query}\n"
        f"Clinical context: {state.task_summary}\n\n"
        f"Source: {last.tool_label}\nResult:\n{last.error or last.formatted_result}"
    )
    out = model.generate_constrained(
        Node.RESULT_CLASSIFY,
        conversation(SYSTEM_PROMPT, user, results=shortenable([last])), SCHEMA,
        temperature=TEMPERATURE, max_tokens=MAX_TOKENS,
    )
    update = {"last_result_classification": out.quality, "last_result_summary": out.brief_summary}
    output = out.model_dump()
    if last.error_type is not None:
        quality = "error_retryable" if last.error_type in TEMPORARY_ERRORS else "error_fatal"
        if quality != out.quality:
            update["last_result_classification"] = quality
            output.update(quality=quality, model_said=out.quality)
    return NodeResult(update, output, Node.DETERMINISTIC_ROUTER)
