"""The prompt where the clinician types a question; Enter sends it."""

from __future__ import annotations

from textual.message import Message
from textual.widgets import Input

PLACEHOLDER = "Ask a question and press Enter"


class QuestionInput(Input):
    class Asked(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs) -> None:
        super().__init__(placeholder=PLACEHOLDER, max_length=2000, **kwargs)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if text:
            self.value = ""
            self.post_message(self.Asked(text))
