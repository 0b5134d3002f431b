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
from appliance.agent.trace_words import (
    approval_parts,
    arg_word,
    trace_parts,
    withheld_words,
)

__all__ = ["TracePanel", "approval_line", "arg_word", "detail_lines", "trace_line"]

def trace_line(event: TraceEvent) -> Text:
    """The one-line summary of a node, in clinical words (``appliance.agent.trace_words``)."""
    return _text(trace_parts(event))


def approval_line(event: TraceEvent) -> Text | None:
    """The clinician's time in the approval dialog, on its own line (it is not tool time)."""
    parts = approval_parts(event)
    return None if parts is None else _text(parts)


def _text(parts) -> Text:
    line = Text()
    for text, style in parts:
        line.append(text, style=style or "")
    return line


def detail_lines(event: TraceEvent) -> list[str]:
    raw = event.to_dict()
    if (raw.get("output") or {}).get("withheld"):  # a withheld patient ID is never shown
        raw["output"] = {**raw["output"], "withheld": withheld_words(raw["output"]["withheld"])}
    return json.dumps(raw, indent=2, ensure_ascii=False, default=str).splitlines()


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
