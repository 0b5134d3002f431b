"""Attach a PNG or JPEG to the next question by typing its path."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

MAGIC = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG"}
MAX_BYTES = 50 << 20


def image_problem(path: str) -> str | None:
    """Why ``path`` cannot be attached, or None when it is a readable PNG/JPEG."""
    file = Path(path).expanduser()
    if not file.is_file():
        return f"There is no file at {file}."
    try:
        size = file.stat().st_size
        with file.open("rb") as handle:
            head = handle.read(8)
    except OSError as exc:
        return f"The file cannot be read ({exc.strerror})."
    if size > MAX_BYTES:
        return "The image is larger than 50 MB."
    if not any(head.startswith(magic) for magic in MAGIC):
        return "Only PNG and JPEG images can be attached."
    return None


class AttachImageScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, analysable: bool, cursor_blink: bool = True) -> None:
        super().__init__()
        self.analysable = analysable
        self._cursor_blink = cursor_blink

    def compose(self) -> ComposeResult:
        with Vertical(id="attach-dialog") as dialog:
            dialog.border_title = "Attach an image - Enter attaches, Escape closes"
            field = Input(placeholder="Path of a PNG or JPEG file", id="attach-path")
            field.cursor_blink = self._cursor_blink
            yield field
            note = ("The image will be analysed with the question." if self.analysable else
                    "Image analysis unavailable on this model: the image will be noted, not analysed.")
            yield Static(note, id="attach-note", markup=False)
            yield Static("", id="attach-error", markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        path = event.value.strip()
        problem = image_problem(path) if path else "Type the path of an image."
        if problem:
            self.query_one("#attach-error", Static).update(problem)
            return
        self.dismiss(str(Path(path).expanduser().resolve()))

    def action_close(self) -> None:
        self.dismiss(None)
