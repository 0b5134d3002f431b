"""Small helpers the LLM nodes share: message assembly and how prompts list the tools (their
token budgets are ``appliance.llm.grammar.token_budget``).

Invariant: every prompt that lists the tools lists all of them in ``PROMPT_TOOLS`` order (by
name, so no tool is singled out by coming first), each with its example from ``TOOL_EXAMPLES``
(one per tool, so no tool is the only one shown by example)."""

from __future__ import annotations

from appliance.llm.prompt import Message
from mcp_servers.contracts import ARG_SCHEMAS, WRITE_TOOLS

PROMPT_TOOLS: tuple[str, ...] = tuple(sorted(ARG_SCHEMAS))
TOOL_EXAMPLES: dict[str, str] = {
    "add_allergy": "Add a sulfa allergy with rash for pat-003.",
    "analyze_medical_image": "What does this chest X-ray show?",
    "change_medication_order": "Increase metformin to 1000 mg twice daily for pat-004.",
    "check_drug_interactions": "Can I give clarithromycin to someone on simvastatin?",
    "check_drug_safety": "Boxed warnings for amiodarone?",
    "find_clinical_trials": "Recruiting trials for mesothelioma?",
    "get_patient_chart": "Show me the chart of pat-004.",
    "get_trial_details": "Eligibility criteria of NCT02300883?",
    "prescreen_for_trials": "Is this patient eligible for any trials?",
    "prescribe_medication": "Start lisinopril 10 mg daily for pat-002.",
    "save_clinical_note": "Save a note for pat-001: doing well.",
    "search_medical_literature": "Evidence for SGLT2 inhibitors in heart failure?",
    "search_patient": "Find the patient Ana Lopez.",
    "update_medication_status": "Stop the warfarin for pat-005: bleeding.",
}


def conversation(system: str, user: str, history: tuple[tuple[str, str], ...] = (),
                 results: tuple[str, ...] = ()) -> list[Message]:
    """System text, the recent exchanges (user/assistant), then the current user message;
    ``results`` are the tool results inside it, which the runtime may shorten to fit the
    context (never the rest of the message)."""
    messages = [Message("system", system)]
    for role, text in history:
        messages.append(Message("user" if role == "user" else "assistant", text))
    messages.append(Message("user", user, shortenable=tuple(r for r in results if r)))
    return messages


def shortenable(results) -> tuple[str, ...]:
    """The formatted successful read results among ``results`` (``ToolResult``s): what the
    runtime may shorten to fit the context. A write's result (with its safety report) and
    every error message stay whole."""
    return tuple(r.formatted_result for r in results
                 if r.error_type is None and r.formatted_result and r.tool_name not in WRITE_TOOLS)
