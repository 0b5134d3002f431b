"""The reasoning trace in the clinician's words, one line per graph node: what the step did, how
long it took, the source with its arguments as a readable list and a one-line result summary,
what comes next and why. The terminal's trace panel and the line session's ``/trace`` both read
it, so they say the same thing.

Invariants: a line is a list of (text, style) parts; style names are rich styles or None, and the
text is never markup, so tool arguments that contain brackets are shown as typed. A patient ID
the fact guard withheld (in no source) is never shown, here or in the raw details
(``withheld_words``).
"""

from __future__ import annotations

from appliance.agent.reading.patient_refs import find_patient_ids
from appliance.agent.state import TraceEvent
from mcp_servers.contracts import TOOL_LABELS

Parts = list[tuple[str, str | None]]
# A withheld patient ID was in no source: the trace names the kind of fact, never the ID itself.
WITHHELD_ID = "an ID in no source"


def withheld_words(items) -> list[str]:
    """The fact guard's withheld facts as a screen may show them: patient IDs hidden."""
    out = []
    for item in items or []:
        text = str(item)
        for pid in find_patient_ids(text):
            text = text.replace(pid, WITHHELD_ID)
        out.append(text)
    return out

MAX_ARGS_CHARS = 100

# The trace speaks the clinician's language; the internal codes stay in the expanded details.
INTENT_WORDS = {"DIRECT": "answered directly", "TOOL_NEEDED": "needs a source"}
QUALITY_WORDS = {
    "success_rich": "found results", "success_partial": "found some results", "no_results": "found nothing",
    "error_retryable": "a temporary problem", "error_fatal": "could not be done",
}
NEXT_WORDS = {
    "SYNTHESIZE": "writing the answer", "TOOL_SELECT": "choosing the next source",
    "ERROR_HANDLER": "recovering from an error", "TOOL_EXECUTE": "trying again",
    "RESULT_CLASSIFY": "checking the result", "INTENT_CLASSIFY": "understanding the question",
}
KIND_WORDS = {"answer": "answer", "clarification": "a question for you", "notice": "notice"}
ARG_WORDS = {"medication_name": "medication", "new_medication_name": "switch to", "dosage": "dose", "drug_name": "drug", "drug_names": "drugs",
             "note_text": "note", "note_type": "note type", "substance": "allergen", "patient_id": "patient",
             "max_results": "at most"}


def _words(table: dict[str, str], code) -> str:
    return table.get(str(code), str(code).replace("_", " ").lower())


def arg_word(name: str) -> str:
    """An argument's name in the clinician's words ("dosage" -> "dose"): the trace and the approval dialog."""
    return _words(ARG_WORDS, name)


def readable_args(args: dict) -> str:
    """'drug: metformin; dose: 500 mg' (the raw JSON is one key away: Enter expands the line)."""
    parts = []
    for key, value in args.items():
        if value in (None, "", [], {}):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(f"{arg_word(key)}: {shown}")
    text = "; ".join(parts) or "no details"
    return text if len(text) <= MAX_ARGS_CHARS else text[: MAX_ARGS_CHARS - 1] + "…"


def _tool_label(tool: str) -> str:
    """The clinical label a clinician reads; the internal name stays in the expanded details."""
    return TOOL_LABELS.get(tool, tool)


def approval_seconds(event: TraceEvent) -> float | None:
    value = (event.output or {}).get("approval_seconds")
    return float(value) if isinstance(value, (int, float)) else None


def trace_parts(event: TraceEvent) -> Parts:
    """The one-line summary of a node, in clinical words."""
    line: Parts = []
    line.append((event.label, "bold"))
    waited = approval_seconds(event) or 0.0
    line.append((f" {max(event.seconds - waited, 0.0):.1f} s", "dim"))
    output = event.output or {}
    if event.node == "INTENT_CLASSIFY" and output.get("intent"):
        line.append((f" · {_words(INTENT_WORDS, output['intent'])}", None))
        if output.get("suggested_tool"):
            line.append((f" ({_tool_label(output['suggested_tool'])})", None))
    if event.node == "RESULT_CLASSIFY" and output.get("quality"):
        line.append((f" · {_words(QUALITY_WORDS, output['quality'])}", None))
    if event.tool:
        line.append((f" · {_tool_label(event.tool)}", None))
        if event.args is not None:
            line.append((f" ({readable_args(event.args)})", None))
    if event.result_summary:
        line.append((f" → {event.result_summary}", None))
    if event.decision:
        line.append((f" → {_words(NEXT_WORDS, event.decision)}", "bold"))
        if event.reason:
            line.append((f": {event.reason}", None))
    if event.node == "SYNTHESIZE" and output.get("kind"):
        line.append((f" · {_words(KIND_WORDS, output['kind'])}", None))
        if output.get("fallback_used"):
            line.append((" (the findings as found)", "italic"))
        elif output.get("withheld"):
            line.append((" (the model's wording withheld: " + ", ".join(withheld_words(output["withheld"])) + ")",
                         "italic"))
        elif output.get("by") == "code":
            line.append((" (the chart's facts, written by code)", "italic"))
    return line


def approval_parts(event: TraceEvent) -> Parts | None:
    """The clinician's time in the approval dialog, on its own line (it is not tool time)."""
    waited = approval_seconds(event)
    if waited is None:
        return None
    line: Parts = [("Waiting for your approval", "bold")]
    line.append((f" {waited:.1f} s", "dim"))
    rejected = (event.output or {}).get("error_type") == "rejected_by_user"
    line.append((" · rejected" if rejected else " · approved", None))
    return line


def plain(parts: Parts | None) -> str:
    """A line's text without styles (the line session)."""
    return "".join(text for text, _style in parts or [])
