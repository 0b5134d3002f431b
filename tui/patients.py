"""Patient context for the clinic terminal: search and open a patient, close it, load the chart.

A mixin of ``ClinicApp``: these handlers and actions run on the UI thread and own the patient
state (``patient_id``); the chart is fetched in a thread worker that only posts
``ChartLoaded`` / ``ChartFailed``. A chart for a patient who is no longer open is dropped.
"""

from __future__ import annotations

from textual import work

from appliance.tools.base import ToolOutcome
from tui import events
from tui.backend import call_tool
from tui.services import SERVER_FAULTS
from tui.screens.patient_search import PatientSearchScreen
from tui.workers import Closing, abandonable

CHART_DEADLINE = 10.0


class PatientHandling:
    patient_id: str | None
    chart: dict | None  # the open patient's chart as last loaded (None while loading or closed)

    def action_patient(self) -> None:
        screen = PatientSearchScreen(self._search_patient, cursor_blink=self.cursor_blink)
        self.push_screen(screen, callback=lambda match: match and self._set_patient(match["patient_id"], match.get("name")))

    def _search_patient(self, name: str) -> ToolOutcome:
        """Runs in the search dialog's worker thread."""
        if self.tools is None and self.tools_error:
            return ToolOutcome(error_type="service_unavailable",
                               message=f"the record service is not running ({self.tools_error}); F5 starts it again")
        try:
            return abandonable(self._quitting, call_tool, self.tools, "search_patient", {"name": name},
                               self.settings.tool_deadline_seconds)
        except Closing:
            return ToolOutcome(error_type="service_unavailable", message="the terminal is closing")

    def action_close_patient(self) -> None:
        if self.patient_id:
            self._set_patient(None)
            self.notice("Patient closed.")

    def _set_patient(self, patient_id: str | None, name: str | None = None, persist: bool = True) -> None:
        switching = patient_id is not None and persist and self.history and self.context_patients - {patient_id}
        if switching and self.turn is not None:
            # A new conversation would take the running (or waiting) question off the screen.
            self.notice(f"{name or patient_id} was not opened: an answer is still being written. Wait for it, "
                        "or press Escape to cancel it, then open the patient again.", "warning")
            return
        if switching:
            # The conversation is about another patient: its facts must not become this
            # patient's context. It stays saved, and resumable under its own patients.
            self._clear_context()
            self.notice(f"Opened {name or patient_id}: a new conversation has started; "
                        "the previous one is saved (Ctrl+R resumes it).")
        self.patient_id = patient_id
        self.refresh_bindings()
        self.chart = None
        if patient_id is None:
            self.main.patient.show_none()
            self.main.banner.show_none()
        else:
            self.main.patient.show_loading(patient_id, name)
            self.main.banner.show_loading(patient_id, name)
            self._load_chart(patient_id)
        if persist and self.session is not None:
            self._store_call(self.store.set_patient, self.session.id, patient_id)

    def _load_chart(self, patient_id: str) -> None:
        if self.tools is not None:
            self._fetch_chart(self.tools, patient_id)

    @work(thread=True, group="chart", exclusive=True, exit_on_error=False)
    def _fetch_chart(self, tools, patient_id: str) -> None:
        try:
            outcome = abandonable(self._quitting, call_tool, tools, "get_patient_chart",
                                  {"patient_id": patient_id}, CHART_DEADLINE)
        except Closing:
            return
        if outcome.ok:
            self.post_message(events.ChartLoaded(patient_id, outcome.result or {}))
        else:
            if outcome.error_type in SERVER_FAULTS:  # the record server did not answer: down at once
                self.post_message(events.ServerHealth({"ehr": False}))
            self.post_message(events.ChartFailed(patient_id, outcome.message or outcome.error_type or "unknown error"))

    def on_chart_loaded(self, message: events.ChartLoaded) -> None:
        if message.patient_id == self.patient_id:
            self.chart = message.chart
            self.main.patient.show_chart(message.patient_id, message.chart)
            self.main.banner.show_chart(message.patient_id, message.chart)

    def on_chart_failed(self, message: events.ChartFailed) -> None:
        if message.patient_id == self.patient_id:
            self.main.patient.show_problem(message.patient_id, message.message)
            self.main.banner.show_problem(message.patient_id)
            self.notice(f"The chart could not be loaded: {message.message}", "error")
