"""One message in the conversation: the clinician's question, the assistant's answer as it
streams in, a clarification question (styled differently), or a notice.

Invariant: model output is shown as plain text (never parsed as markup), so brackets or
markup-like text in an answer cannot break or restyle the display.
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
        self.streamed = ""
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

    def append(self, piece: str) -> None:
        """A streamed piece of the answer."""
        if not self.streamed:
            self.set_kind("answer")
        self.streamed += piece
        self.show(self.streamed)

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
        """cancelled / failed: keep what was streamed and say what happened."""
        self.set_kind("answer" if self.streamed else "notice")
        self.add_class(status)
        self.border_subtitle = status
        self.show((self.streamed + "\n" if self.streamed else "") + f"[{detail or status}]")
