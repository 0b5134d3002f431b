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
        # No select-all on focus: a key typed elsewhere moves here and must not be overwritten.
        super().__init__(placeholder=PLACEHOLDER, max_length=2000, select_on_focus=False, **kwargs)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if text:
            self.value = ""
            self.post_message(self.Asked(text))
