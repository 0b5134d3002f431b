"""The reasoning trace: one line per graph node as it finishes, in clinical words (what the
step did, how long it took, the source with its arguments as a readable list and a one-line
result summary, what comes next and why); each line expands to the node's full structured
output (the raw JSON). A write's wait for approval is its own line, not tool time.

Invariant: labels are built as rich Text, never parsed as markup, so tool arguments that
contain brackets are shown as typed.
"""

from __future__ import annotations

import json

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from appliance.agent.state import TraceEvent
from mcp_servers.contracts import TOOL_LABELS

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
ARG_WORDS = {"medication_name": "medication", "dosage": "dose", "drug_name": "drug", "drug_names": "drugs",
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


def trace_line(event: TraceEvent) -> Text:
    """The one-line summary of a node, in clinical words."""
    line = Text()
    line.append(event.label, style="bold")
    waited = approval_seconds(event) or 0.0
    line.append(f" {max(event.seconds - waited, 0.0):.1f} s", style="dim")
    output = event.output or {}
    if event.node == "INTENT_CLASSIFY" and output.get("intent"):
        line.append(f" · {_words(INTENT_WORDS, output['intent'])}")
        if output.get("suggested_tool"):
            line.append(f" ({_tool_label(output['suggested_tool'])})")
    if event.node == "RESULT_CLASSIFY" and output.get("quality"):
        line.append(f" · {_words(QUALITY_WORDS, output['quality'])}")
    if event.tool:
        line.append(f" · {_tool_label(event.tool)}")
        if event.args is not None:
            line.append(f" ({readable_args(event.args)})")
    if event.result_summary:
        line.append(f" → {event.result_summary}")
    if event.decision:
        line.append(f" → {_words(NEXT_WORDS, event.decision)}", style="bold")
        if event.reason:
            line.append(f": {event.reason}")
    if event.node == "SYNTHESIZE" and output.get("kind"):
        line.append(f" · {_words(KIND_WORDS, output['kind'])}")
        if output.get("fallback_used"):
            line.append(" (the findings as found)", style="italic")
    return line


def approval_line(event: TraceEvent) -> Text | None:
    """The clinician's time in the approval dialog, on its own line (it is not tool time)."""
    waited = approval_seconds(event)
    if waited is None:
        return None
    line = Text("Waiting for your approval", style="bold")
    line.append(f" {waited:.1f} s", style="dim")
    rejected = (event.output or {}).get("error_type") == "rejected_by_user"
    line.append(" · rejected" if rejected else " · approved")
    return line


def detail_lines(event: TraceEvent) -> list[str]:
    return json.dumps(event.to_dict(), indent=2, ensure_ascii=False, default=str).splitlines()


class TracePanel(Tree):
    """Turns are top-level nodes; each node event is a collapsed child holding its details."""

    def __init__(self, **kwargs) -> None:
        super().__init__("Reasoning trace", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self._turns: dict[int, TreeNode] = {}

    def start_turn(self, turn_id: int, question: str) -> None:
        short = question if len(question) <= 60 else question[:59] + "…"
        node = self.root.add(Text(f"Turn {turn_id}: {short}"), expand=True)
        self._turns[turn_id] = node
        self.root.expand()
        self.call_after_refresh(self.scroll_end, animate=False)

    def add_event(self, turn_id: int, event: TraceEvent) -> None:
        parent = self._turns.get(turn_id)
        if parent is None:
            return
        waited = approval_line(event)
        if waited is not None:
            parent.add_leaf(waited)
        node = parent.add(trace_line(event), data=event, expand=False)
        for line in detail_lines(event):
            node.add_leaf(Text(line))
        self.call_after_refresh(self.scroll_end, animate=False)

    def finish_turn(self, turn_id: int, status: str) -> None:
        parent = self._turns.get(turn_id)
        if parent is not None and status != "complete":
            label = parent.label.copy()
            label.append(f" [{status}]", style="bold")
            parent.set_label(label)

    def events(self, turn_id: int) -> list[TraceEvent]:
        parent = self._turns.get(turn_id)
        return [child.data for child in parent.children if child.data is not None] if parent else []

    def clear_turns(self) -> None:
        self.clear()
        self._turns.clear()
