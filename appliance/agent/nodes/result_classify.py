"""Node 5, RESULT_CLASSIFY (LLM, T=0.0): what happened, never what to do next (docs/design.md §4.5).

Code labels a failed call itself: the error type says whether it was temporary or permanent, so
the trace never reads "found results" after an error (the model's label stays in the details).
"""

from __future__ import annotations

from appliance.agent.nodes.prompting import conversation, shortenable
from appliance.agent.schemas import ResultAssessment
from appliance.agent.state import AgentState, Node
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


def run(state: AgentState, model: LanguageModel) -> tuple[dict, dict]:
    last = state.last_tool_result
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
    return update, output
