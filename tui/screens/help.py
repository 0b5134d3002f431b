"""The help screen: every key from ``tui.actions.ACTIONS`` and how the terminal works."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from tui.actions import ACTIONS, key_display

USAGE = " ".join("""Type a question in the prompt and press Enter; the answer streams in.
Questions asked while the model loads wait for it. The open patient's ID goes with every
question. Writes to the record (prescriptions, allergies, notes) always ask for approval
first: edit the arguments if needed, then Ctrl+Y approves, Ctrl+R or Escape rejects.
In the trace, Enter or Space expands a line to its full output. Tab moves between panels.""".split())


def help_keys() -> Text:
    rows = [(key_display(a.key), a.description) for a in ACTIONS]
    rows += [("Enter", "Send the question"), ("Ctrl+P", "Command palette: search every command")]
    width = max(len(key) for key, _ in rows) + 2
    text = Text()
    for key, description in rows:
        text.append(key.ljust(width), style="bold")
        text.append(description + "\n")
    text.rstrip()
    return text


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-dialog") as dialog:
            dialog.border_title = "Help - Escape closes"
            yield Static(help_keys(), id="help-keys")
            yield Static(Text(USAGE), id="help-usage")
        yield Footer(compact=True, show_command_palette=False)

    def action_close(self) -> None:
        self.dismiss(None)
