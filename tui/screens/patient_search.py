"""Find a patient by name and pick one of the matches (several patients may share a name,
so each match shows birth date, sex, MRN and ID).

Invariant: the search runs in a thread worker through the ``search`` callable the app
passes in; the worker only posts ``Found`` back to this screen.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from appliance.tools.base import ToolOutcome
from appliance.wording import plural
from ehr_db.name_match import closest_in


def match_line(match: dict) -> str:
    parts = [match.get("name") or "?", f"born {match.get('birth_date') or '?'}", match.get("sex") or "",
             f"MRN {match['mrn']}" if match.get("mrn") else "", f"ID {match.get('patient_id')}"]
    return " · ".join(p for p in parts if p)


class PatientSearchScreen(ModalScreen[dict | None]):
    BINDINGS = [Binding("escape", "close", "Close")]

    class Found(Message):
        def __init__(self, query: str, outcome: ToolOutcome) -> None:
            super().__init__()
            self.query = query
            self.outcome = outcome

    def __init__(self, search: Callable[[str], ToolOutcome], cursor_blink: bool = True) -> None:
        super().__init__()
        self._search = search
        self._cursor_blink = cursor_blink
        self.matches: list[dict] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="patient-dialog") as dialog:
            dialog.border_title = "Open a patient - type a name, Enter searches, Escape closes"
            field = Input(placeholder="Patient name, e.g. James Wilson", id="patient-query")
            field.cursor_blink = self._cursor_blink
            yield field
            yield Static("", id="patient-search-status", markup=False)
            yield OptionList(id="patient-matches")
        yield Footer(compact=True, show_command_palette=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        query = event.value.strip()
        if not query:
            return
        self.query_one("#patient-search-status", Static).update(f"Searching for {query}…")
        self.run_search(query)

    @work(thread=True, exclusive=True, group="patient-search", exit_on_error=False)
    def run_search(self, query: str) -> None:
        try:
            outcome = self._search(query)
        except Exception as exc:  # noqa: BLE001 - shown as a message, never a crash
            outcome = ToolOutcome(error_type="server_error", message=f"the search failed ({type(exc).__name__})")
        self.post_message(self.Found(query, outcome))

    def on_patient_search_screen_found(self, message: Found) -> None:
        status = self.query_one("#patient-search-status", Static)
        options = self.query_one("#patient-matches", OptionList)
        options.clear_options()
        if not message.outcome.ok and message.outcome.error_type == "not_found":
            # no exact match: the record's closest names (ehr_db.name_match), to choose from
            self.matches = list(closest_in(message.outcome.message or ""))
            if not self.matches:
                status.update(f"No patient matches {message.query!r}.")
                return
            status.update(f"No exact match for {message.query!r}; did you mean one of these? Choose with Enter.")
            self._offer()
            return
        if not message.outcome.ok:
            self.matches = []
            status.update(f"The search could not be done: {message.outcome.message or message.outcome.error_type}")
            return
        self.matches = [m for m in (message.outcome.result or {}).get("matches", []) if m.get("patient_id")]
        total = (message.outcome.result or {}).get("total_matches", len(self.matches))
        if not self.matches:
            status.update(f"No patient matches {message.query!r}.")
            return
        shown = f" (showing {len(self.matches)})" if total > len(self.matches) else ""
        status.update(f"{plural(total, 'match')} for {message.query!r}{shown}: choose one with Enter.")
        self._offer()

    def _offer(self) -> None:
        options = self.query_one("#patient-matches", OptionList)
        options.add_options(Option(match_line(m), id=str(i)) for i, m in enumerate(self.matches))
        options.highlighted = 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.matches[int(event.option.id)])

    def action_close(self) -> None:
        self.dismiss(None)
