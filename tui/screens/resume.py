"""Pick a saved session to resume, most recent first."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from appliance.accounts.sessions import Session
from appliance.wording import local_time, plural


def session_line(session: Session) -> str:
    """Title, local time, exchanges and every patient the session touched."""
    exchanges = session.message_count // 2
    patients = session.patient_ids or ((session.patient_id,) if session.patient_id else ())
    label = f" · {plural(len(patients), 'patient')} {', '.join(patients)}" if patients else ""
    return f"{session.title} · {local_time(session.updated_at)} · {plural(exchanges, 'exchange')}{label}"


class SessionsScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, sessions: list[Session]) -> None:
        super().__init__()
        self.sessions = sessions

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-dialog") as dialog:
            dialog.border_title = "Resume a session - Enter opens, Escape closes"
            if not self.sessions:
                yield Static("No saved sessions yet.", id="sessions-empty")
            yield OptionList(*(Option(session_line(s), id=s.id) for s in self.sessions), id="sessions-list")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.sessions:
            options.highlighted = 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_close(self) -> None:
        self.dismiss(None)
