"""Patient context for the clinic terminal: search and open a patient, close it, load the chart,
and choose one in words as the line session does (``appliance.conversation.patient_choice``: "pull up james
wilson", then "the one born 1960"; a typo offers the closest names).

A mixin of ``ClinicApp``: these handlers and actions run on the UI thread. The open patient and
the last list of patients shown are the conversation core's (``appliance.conversation``): opening
a patient asks it, and it alone decides whether a new conversation starts (the line session's
rule too); this view clears the chat when one does, and refuses to while an answer is being
written (a new conversation would take the running question off the screen). After an answered
turn the patient it settled on becomes current (``follow_turn``, shown at once); the rule is
applied to them before the next question (``before_question``), never mid-turn. The chart and a
search in words are fetched in thread workers that only post ``ChartLoaded`` / ``ChartFailed``
/ ``PatientWords``. A chart for a patient who is no longer open is dropped.
"""

from __future__ import annotations

from textual import work

from appliance.conversation import Conversation
from appliance.conversation.patient_choice import Shown, open_request, resolve
from appliance.tools.base import ToolOutcome
from tui import events
from tui.backend import call_tool
from tui.screens.patient_search import PatientSearchScreen
from tui.services import SERVER_FAULTS
from tui.workers import Closing, abandonable

CHART_DEADLINE = 10.0


class PatientHandling:
    conversation: Conversation
    chart: dict | None  # the open patient's chart as last loaded (None while loading or closed)

    def action_patient(self) -> None:
        screen = PatientSearchScreen(self._search_patient, cursor_blink=self.cursor_blink)
        self.push_screen(screen, callback=lambda match: match and self.open_patient(match["patient_id"], match.get("name")))

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

    def choose_in_words(self, text: str) -> bool:
        """True when ``text`` picks from the last list shown or asks to open a patient by name:
        it is resolved by code in a worker (no model call) instead of going to the agent."""
        if self.turn is not None or self.tools is None:
            return False
        shown = Shown(self.conversation.shown.candidates, self.conversation.shown.agent_asked)
        if shown.agent_asked or (not (shown.candidates and shown.pick(text)) and open_request(text) is None):
            return False
        self._resolve_words(text, shown)
        return True

    @work(thread=True, group="patient-words", exclusive=True, exit_on_error=False)
    def _resolve_words(self, text: str, shown: Shown) -> None:
        outcome = resolve(text, shown, self._search_patient)
        self.post_message(events.PatientWords(text, outcome, shown.candidates))

    def on_patient_words(self, message: events.PatientWords) -> None:
        """Open the chosen patient first (it may start a new conversation, clearing the chat),
        then show the line and code's words, or send the line on to the agent."""
        self.conversation.shown = Shown(message.shown)
        outcome, opened = message.outcome, message.outcome.opened
        if opened is not None:
            self.open_patient(opened.patient_id, opened.name)
        is_open = opened is not None and self.conversation.patient_id == opened.patient_id
        if outcome.question and is_open:
            self.ask_agent(message.text)  # the line asks something about the chosen patient too
            return
        lines = outcome.lines or ([f"Opened {opened.name}, born {opened.birth_date or 'unknown'}, ID {opened.patient_id}."]
                                  if is_open else [])
        self.main.chat.add_question(message.text)
        if lines:
            self.main.chat.add_reply("").finish("\n".join(lines), "answer")
        self.main.chat.scroll_to_latest()

    def action_close_patient(self) -> None:
        if self.conversation.patient_id:
            self.open_patient(None)
            self.notice("Patient closed.")

    def open_patient(self, patient_id: str | None, name: str | None = None) -> None:
        """The clinician opens ``patient_id`` (None closes the patient); the core decides whether a
        new conversation starts."""
        if self.turn is not None and self.conversation.starts_new(patient_id):
            self.notice(f"{name or patient_id} was not opened: an answer is still being written. Wait for it, "
                        "or press Escape to cancel it, then open the patient again.", "warning")
            return
        if self.conversation.open_patient(patient_id, name).new_conversation:
            self._clear_chat()
            self.notice(f"Opened {name or patient_id}: a new conversation has started; "
                        "the previous one is saved (Ctrl+R resumes it).")
        self._show_patient(patient_id, name)

    def follow_turn(self, state) -> bool:
        """After an answered turn: the core makes the patient the turn settled on current (the
        line session's rule too); this view shows the change and that patient's chart. No new
        conversation starts here: the core decides that before the next question
        (``before_question``). True when the current patient changed."""
        announced = self.conversation.follow_turn(state)
        if announced is None:
            return False
        pid = self.conversation.patient_id
        self._show_patient(pid, self.conversation.current.names.get(pid) if pid else None)
        self.notice(announced)
        return True

    def before_question(self) -> None:
        """Before a question goes to the agent: when the core starts a new conversation for the
        patient a turn made current, the chat clears and says so, as opening a patient does."""
        if self.conversation.before_question():
            self._clear_chat()
            self.notice(f"A new conversation has started for {self.conversation.current.label()}; "
                        "the previous one is saved (Ctrl+R resumes it).")

    def _show_patient(self, patient_id: str | None, name: str | None = None) -> None:
        """The banner and the patient panel show the current patient; its chart loads."""
        self.refresh_bindings()
        self.chart = None
        if patient_id is None:
            self.main.patient.show_none()
            self.main.banner.show_none()
        else:
            self.main.patient.show_loading(patient_id, name)
            self.main.banner.show_loading(patient_id, name)
            self._load_chart(patient_id)

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
        if message.patient_id == self.conversation.patient_id:
            self.chart = message.chart
            self.main.patient.show_chart(message.patient_id, message.chart)
            self.main.banner.show_chart(message.patient_id, message.chart)

    def on_chart_failed(self, message: events.ChartFailed) -> None:
        if message.patient_id == self.conversation.patient_id:
            self.main.patient.show_problem(message.patient_id, message.message)
            self.main.banner.show_problem(message.patient_id)
            self.notice(f"The chart could not be loaded: {message.message}", "error")
