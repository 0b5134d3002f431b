"""The reasoning trace: one line per graph node as it finishes (clinical label, duration,
the tool's clinical label with its arguments and a one-line result summary, router decision
and why); each line expands to the node's full structured output.

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

MAX_ARGS_CHARS = 60


def _compact(value) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))
    return text if len(text) <= MAX_ARGS_CHARS else text[: MAX_ARGS_CHARS - 1] + "…"


def _tool_label(tool: str) -> str:
    """The clinical label a clinician reads; the internal name stays in the expanded details."""
    return TOOL_LABELS.get(tool, tool)


def trace_line(event: TraceEvent) -> Text:
    """The one-line summary of a node."""
    line = Text()
    line.append(event.label, style="bold")
    line.append(f" {event.seconds:.1f} s", style="dim")
    output = event.output or {}
    if event.node == "INTENT_CLASSIFY" and output.get("intent"):
        line.append(f" · {output['intent']}")
        if output.get("suggested_tool"):
            line.append(f" ({_tool_label(output['suggested_tool'])})")
    if event.node == "RESULT_CLASSIFY" and output.get("quality"):
        line.append(f" · {output['quality']}")
    if event.tool:
        line.append(f" · {_tool_label(event.tool)}")
        if event.args is not None:
            line.append(" " + _compact(event.args))
    if event.result_summary:
        line.append(f" → {event.result_summary}")
    if event.decision:
        line.append(f" → {event.decision}", style="bold")
        if event.reason:
            line.append(f": {event.reason}")
    if event.node == "SYNTHESIZE" and output.get("kind"):
        line.append(f" · {output['kind']}")
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
        return [child.data for child in parent.children] if parent else []

    def clear_turns(self) -> None:
        self.clear()
        self._turns.clear()
