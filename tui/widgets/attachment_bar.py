"""The line above the prompt naming the attached image and whether it will be analysed."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static


class AttachmentBar(Static):
    def __init__(self, **kwargs) -> None:
        super().__init__("", markup=False, **kwargs)
        self.display = False

    def show_image(self, path: str, analysable: bool) -> None:
        note = "will be analysed" if analysable else "image analysis unavailable on this model"
        self.update(f"Attached: {Path(path).name} ({note}) - sent with the next question")
        self.display = True

    def clear(self) -> None:
        self.update("")
        self.display = False
