"""The terminal's actions, in one table: the footer bindings, the command palette and the
help screen are all generated from it, so a key can never be missing from one of them.

Keys are chosen not to collide with the prompt's own editing keys (Input binds ctrl+a/e/d/
k/u/w/x/c/v), so they work while the clinician is typing.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Action:
    key: str
    action: str  # an action of ClinicApp (without the "action_" prefix)
    label: str  # short footer label
    description: str  # palette and help text
    app_level: bool = False  # bound on the app (works on every screen), not the main screen
    # Shown in the footer whenever it can act (ClinicApp.check_action hides the rest). The
    # 80-column footer holds the keys of every visit (prescreen and lock included); the rest are
    # in F1's help and the command palette.
    footer: bool = True


ACTIONS: tuple[Action, ...] = (
    Action("escape", "cancel_turn", "Cancel", "Stop the answer being generated"),
    Action("ctrl+n", "new_session", "New", "Start a new session"),
    Action("ctrl+r", "sessions", "Resume", "Resume a saved session", footer=False),
    Action("ctrl+o", "patient", "Patient", "Search for a patient and open their chart"),
    Action("ctrl+l", "close_patient", "Close", "Close the open patient"),
    Action("ctrl+t", "toggle_trace", "Trace", "Show or hide the reasoning trace"),
    Action("ctrl+g", "attach_image", "Image", "Attach a PNG or JPEG image to the next question", footer=False),
    Action("f5", "retry_tools", "Retry", "Start the clinical data services again, or re-check them"),
    Action("f6", "prescreen", "Trials", "Prescreen the open patient for clinical trials"),
    Action("ctrl+s", "export_session", "Export", "Save this conversation and its trace summary as a Markdown file",
           footer=False),
    Action("f12", "lock", "Lock", "Lock the terminal; your password unlocks it", app_level=True),
    Action("f1", "help", "Help", "Keys and how to use the terminal"),
    Action("ctrl+q", "quit", "Quit", "Leave the clinic terminal", app_level=True),
)


def bindings() -> list[Binding]:
    """Bindings for the main screen: each calls the app's action of the same name."""
    return [Binding(a.key, f"app.{a.action}", a.label, tooltip=a.description, show=a.footer)
            for a in ACTIONS if not a.app_level]


def app_bindings() -> list[Binding]:
    """Bindings that work on every screen (quit), plus Textual's ctrl+c hint."""
    keys = [Binding(a.key, a.action, a.label, tooltip=a.description, priority=True, show=a.footer)
            for a in ACTIONS if a.app_level]
    return keys + [Binding("ctrl+c", "help_quit", show=False, system=True)]


def key_display(key: str) -> str:
    """How a key is written in help text: ctrl+n -> Ctrl+N."""
    return "+".join(part.capitalize() if len(part) > 1 else part.upper() for part in key.split("+"))
