"""One message in the conversation: the clinician's question, the assistant's answer, a
clarification question (styled differently), or a notice.

Invariants:
- Model output is shown as plain text (never parsed as markup), so brackets or markup-like text
  in an answer cannot break or restyle the display.
- An answer appears whole, once its turn's checks are done (``finish``); until then the reply
  shows only progress (the step and the elapsed seconds), never the model's words as written.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

TITLES = {
    "question": "You",
    "answer": "Assistant",
    "clarification": "Assistant needs more information",
    "notice": "Notice",
    "pending": "Assistant",
}


class ChatMessage(Static):
    def __init__(self, text: str, kind: str, classes: str = "") -> None:
        super().__init__(text, markup=False, classes=f"{kind} {classes}".strip())
        self.kind = kind
        self.text = text
        self.footnote: str | None = None
        self.border_title = TITLES[kind]

    def set_kind(self, kind: str) -> None:
        self.remove_class(self.kind)
        self.kind = kind
        self.add_class(kind)
        self.border_title = TITLES[kind]

    def show(self, text: str) -> None:
        self.text = text
        self.update(text)

    def progress(self, text: str) -> None:
        """The turn's step and elapsed time, while the answer is being made and checked."""
        if self.kind == "pending":
            self.show(text)

    def finish(self, text: str, kind: str, footnote: str | None = None) -> None:
        """The final answer; ``footnote`` (e.g. "verify against the chart") goes under it, apart."""
        self.set_kind(kind)
        self.text, self.footnote = text, footnote
        if footnote:
            body = Text(text)
            body.append("\n\n" + footnote, style="italic bold")
            self.update(body)
        else:
            self.update(text)

    def mark(self, status: str, detail: str = "") -> None:
        """cancelled / failed: say what happened (no unchecked words were shown to keep)."""
        self.set_kind("notice")
        self.add_class(status)
        self.border_subtitle = status
        self.show(f"[{detail or status}]")
