"""Node 5a, ERROR_HANDLER (hybrid; docs/design.md §4.7, §9.2, §10).

Code decides ask_user and skip (the model scores 0% on those); only the choice between
retrying as is and retrying with different arguments goes to the model (T=0.0). An argument
the clinician can fix (a missing value, a patient ID the record does not hold or that is
malformed) is a question to the clinician, never a retry.

Invariants:
- ``decide`` is a pure function of the state and limits.
- A write the clinician rejected is never retried.
- No write is ever retried automatically: a failed write is skipped (after the questions the
  clinician can answer). When its outcome is unknown (a timeout, a connection lost mid-call)
  the message says the record may or may not have been changed and to check the chart; a
  retry could write twice.
- Every message produced here is pre-formatted, clinician-safe text.
- A write asked for with a drug no recogniser source knows but close to one ("amoxicilin") is
  the question "did you mean amoxicillin?" (``orders.misspelt_drug``), before any other
  missing value is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.agent.nodes.prompting import conversation
from appliance.agent.progress import Limits, task_status
from appliance.agent.reading.request import reading_of
from appliance.agent.schemas import RetryStrategy
from appliance.agent.state import AgentState, Node, NodeResult, RouterDecision
from appliance.llm.base import LanguageModel
from appliance.llm.grammar import token_budget
from mcp_servers.contracts import WRITE_TOOLS

SCHEMA = RetryStrategy
TEMPERATURE = 0.0
MAX_TOKENS = token_budget(SCHEMA, 64)

SYSTEM_PROMPT = """A request from a clinical assistant to one of its sources failed. Decide how to retry:
- retry_same: the failure looks temporary (unavailable, busy, timed out); send the same request again.
- retry_different_args: the request itself was the problem (nothing found, details wrong or missing); try different details.
Give a short reason (under 15 words). Answer with JSON only."""


@dataclass(frozen=True)
class ErrorDecision:
    action: str  # "ask_user" | "skip" | "llm_retry"
    reason: str
    message: str | None = None


NO_PATIENT_ID = ErrorDecision("ask_user", "a patient ID is missing", "I need a patient ID to proceed. Could you provide one?")


def decide(state: AgentState, limits: Limits | None = None) -> ErrorDecision:
    limits = limits or Limits()
    last = state.last_tool_result
    etype = last.error_type if last else None
    label = last.tool_label if last else "request"
    if etype == "multiple_patient_matches":
        return ErrorDecision("ask_user", "several patients match", "I found several patients matching that name. Which patient did you mean?")
    if etype == "missing_required_args" and (typo := reading_of(state).misspelt_drug):
        return ErrorDecision("ask_user", "the drug's name is not one code knows",
                             f"'{typo[0]}' is not a drug name I know: did you mean {typo[1]}?")
    if etype == "missing_required_args":
        fields = ", ".join(f.replace("_", " ") for f in last.missing_fields) or "more details"
        if "patient_id" in last.missing_fields:
            return NO_PATIENT_ID
        return ErrorDecision("ask_user", "required details are missing", f"I need more information to complete this request: {fields}.")
    if etype == "not_found" and last.tool_name == "search_patient" \
            and last.args.get("name") in state.extracted_entities.patient_names:
        # The clinician's own name found no one: a question, never a retry nor another patient's chart.
        return ErrorDecision("ask_user", "no patient has the name the clinician wrote",
                             f"No patient named {last.args['name']} is in the record. Check the spelling, "
                             "or give the patient ID.")
    if etype == "patient_not_found" or (etype == "invalid_args" and "patient_id" in last.invalid_fields):
        return _ask_which_patient(etype, last.args.get("patient_id"))
    if etype == "ambiguous_drug_name":
        return ErrorDecision("ask_user", "the drug name is ambiguous", f"The drug name is ambiguous: {last.raw_error or 'please give the full name'}.")
    if etype == "rejected_by_user":
        return ErrorDecision("skip", "the clinician rejected the write", last.error)
    if etype == "permanent_failure":
        return ErrorDecision("skip", "a permanent fault: retrying cannot help", last.error)
    if last is not None and last.tool_name in WRITE_TOOLS:
        if last.outcome_unknown:
            return ErrorDecision("skip", f"a write's outcome is unknown ({etype}): never retried", last.error)
        return ErrorDecision("skip", f"a failed write ({etype}) is never retried automatically", last.error)
    if state.step_count >= limits.max_steps:
        return ErrorDecision("skip", f"step limit reached ({state.step_count}/{limits.max_steps})",
                             f"Unable to complete the {label} within this request.")
    if state.retry_count >= limits.max_retries:
        return ErrorDecision("skip", f"{state.retry_count} retries already", f"Unable to complete the {label} after multiple attempts.")
    if state.total_retries >= limits.max_total_retries:
        return ErrorDecision("skip", "the turn's retry budget is spent", f"Unable to complete the {label} after multiple attempts.")
    if etype == "drug_not_in_database":
        return ErrorDecision("skip", "the drug is not in the database", last.error)
    if etype == "not_found" and _code_made(state, last):
        # The source searched the clinician's own words and found nothing: that is the answer.
        return ErrorDecision("skip", "the source found nothing for the clinician's words", last.error)
    if etype == "service_unavailable" and state.retry_count >= 1:
        return ErrorDecision("skip", "the service is still unavailable", f"The {label} is currently unavailable.")
    return ErrorDecision("llm_retry", "retryable error: the model chooses how to retry")


def _code_made(state: AgentState, last) -> bool:
    """The call is one code read in the clinician's words (``knowledge_requests``)."""
    made = (last.tool_name, repr(sorted(last.args.items())))
    return any(c.signature() == made for c in state.knowledge_calls)


def _ask_which_patient(etype: str, patient_id: object) -> ErrorDecision:
    """A patient ID the record refused is the clinician's to fix: a question, never a retry
    (the same ID fails again) nor a silent skip."""
    shown = " ".join(str(patient_id or "").split())
    shown = shown if len(shown) <= 64 else shown[:64] + "..."
    if not shown:
        return NO_PATIENT_ID
    if etype == "patient_not_found":
        return ErrorDecision("ask_user", "the record holds no patient with that ID",
                             f"{shown} is not a patient ID I know: the record holds no such patient. "
                             "Which patient did you mean? Give a name or a patient ID.")
    return ErrorDecision("ask_user", "the patient ID is malformed",
                         f"'{shown}' is not a patient ID (an ID has only letters, digits, '-' and '.'). "
                         "Which patient did you mean? Give a name or a patient ID.")


def run(state: AgentState, model: LanguageModel, limits: Limits) -> NodeResult:
    """The decision as a node result: next SYNTHESIZE (ask), TOOL_SELECT or SYNTHESIZE (skip,
    by what is left), or TOOL_SELECT (a retry, the model choosing how); the decision is
    recorded with the router's."""
    decision = decide(state, limits)
    last = state.last_tool_result
    if decision.action == "ask_user":
        update = {"clarification_request": decision.message, "error_messages": [decision.message]}
        return _decided(update, {"action": "ask_user"}, Node.SYNTHESIZE, decision.reason, model_call=False)
    if decision.action == "skip":
        skipped = state.skipped_tools + ((last.tool_name,) if last else ())
        update = {"error_messages": [decision.message], "skipped_tools": skipped, "retry_count": 0}
        complete, why = task_status(state.merge({"skipped_tools": skipped}), limits)
        nxt = Node.SYNTHESIZE if complete else Node.TOOL_SELECT
        return _decided(update, {"action": "skip"}, nxt, f"{decision.reason}; {why}", model_call=False)
    user = (
        f"Clinician's question: {state.user_query}\n"
        f"Source: {last.tool_label if last else 'unknown'}\n"
        f"What happened: {last.error if last and last.error else state.last_result_summary}"
    )
    out = model.generate_constrained(
        Node.ERROR_HANDLER, conversation(SYSTEM_PROMPT, user), SCHEMA,
        temperature=TEMPERATURE, max_tokens=MAX_TOKENS,
    )
    update = {
        "retry_mode": out.strategy,
        "retry_count": state.retry_count + 1,
        "total_retries": state.total_retries + 1,
    }
    return _decided(update, {"action": out.strategy, **out.model_dump()}, Node.TOOL_SELECT, decision.reason)


def _decided(update: dict, output: dict, nxt: Node, reason: str, *, model_call: bool = True) -> NodeResult:
    update["router_decisions"] = [RouterDecision(Node.ERROR_HANDLER, nxt, reason)]
    return NodeResult(update, output, nxt, reason=reason, model_call=model_call)
