"""The main screen: conversation and prompt on the left, the patient chart on the right, the
reasoning trace below, the status line on top and the key footer at the bottom.

Invariant: the screen only lays widgets out and holds the bindings; the app owns all state
and talks to the widgets through the attributes created here.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, TextArea

from appliance.accounts.sessions import StoredMessage
from appliance.agent.graph import VERIFY_WITH_CHART, used_patient_data
from appliance.agent.state import TraceEvent
from tui.actions import bindings
from tui.widgets.attachment_bar import AttachmentBar
from tui.widgets.chat_log import ChatLog
from tui.widgets.patient_banner import PatientBanner
from tui.widgets.patient_panel import PatientPanel
from tui.widgets.question_input import QuestionInput
from tui.widgets.status_bar import StatusBar
from tui.widgets.trace_panel import TracePanel


def trace_used_patient_data(trace: list[dict] | None) -> bool:
    """Whether a stored turn read or wrote the record (its answer then carries the chart reminder)."""
    calls = [{"tool": e.get("tool"), "error_type": (e.get("output") or {}).get("error_type")}
             for e in trace or () if e.get("node") == "TOOL_EXECUTE"]
    return used_patient_data(calls)


TRACE_FOLDS_BELOW = 26  # terminal rows: from 26 the full trace leaves ten lines of conversation


class MainScreen(Screen):
    BINDINGS = bindings()
    AUTO_FOCUS = "QuestionInput"

    def __init__(self, profile: str, cursor_blink: bool = True, model_notice: str | None = None) -> None:
        super().__init__()
        self.status = StatusBar(profile, id="status")
        # Always on screen while a non-clinical model answers.
        self.model_notice = Static(f"⚠ {model_notice.upper()}" if model_notice else "", id="model-notice",
                                   markup=False)
        self.model_notice.display = bool(model_notice)
        self.chat = ChatLog(id="chat")
        self.attachment = AttachmentBar(id="attachment")
        self.prompt = QuestionInput(id="prompt")
        self.prompt.cursor_blink = cursor_blink
        self.patient = PatientPanel(id="patient")
        self.banner = PatientBanner(id="banner")
        self.trace = TracePanel(id="trace")
        self.trace.border_title = "Reasoning trace (Ctrl+T hides; Enter expands a line)"

    def compose(self) -> ComposeResult:
        yield self.status
        yield self.model_notice
        with Horizontal(id="main"):
            with Vertical(id="conversation"):
                yield self.banner
                yield self.chat
                yield self.attachment
                yield self.prompt
            yield self.patient
        yield self.trace
        yield Footer(compact=True, show_command_palette=False)  # Ctrl+P is in help: 80 columns

    def show_model_notice(self, notice: str | None) -> None:
        """The notice for the model that answers (demo, or not validated at this site), or none."""
        self.model_notice.update(f"⚠ {notice.upper()}" if notice else "")
        self.model_notice.display = bool(notice)

    def on_resize(self, event: events.Resize) -> None:
        """On a short terminal the trace folds to its latest lines first, so the conversation
        keeps at least ten lines at 80x24 (Ctrl+T still hides it, Tab into it still scrolls)."""
        self.trace.set_class(event.size.height < TRACE_FOLDS_BELOW, "folded")

    def on_key(self, event: events.Key) -> None:
        """Text typed while another part of the screen has focus (the trace, the chart, the
        conversation after a dialog closed) goes to the question box instead of being lost."""
        if not (event.is_printable and event.character) or self.prompt.has_focus:
            return
        focused = self.focused
        if isinstance(focused, (Input, TextArea)):
            return
        if focused is not None and event.key in focused._bindings.key_to_bindings:
            return  # the focused widget's own key (space expands a trace line)
        event.stop()
        event.prevent_default()
        self.prompt.focus()
        self.prompt.insert_text_at_cursor(event.character)

    def show_stored(self, messages: list[StoredMessage]) -> int:
        """Replace the conversation and trace with a stored session's; returns its turn count."""
        self.chat.clear()
        self.trace.clear_turns()
        turns = 0
        for m in messages:
            if m.role == "user":
                turns += 1
                self.chat.add_question(m.text)
                self.trace.start_turn(turns, m.text)
                continue
            reply = self.chat.add_reply()
            reply.finish(m.text, m.kind if m.kind in ("answer", "clarification", "notice") else "answer",
                         VERIFY_WITH_CHART if m.status == "complete" and trace_used_patient_data(m.trace) else None)
            if m.status != "complete":
                reply.add_class(m.status)
                reply.border_subtitle = m.status
            for item in m.trace or []:
                try:
                    self.trace.add_event(turns, TraceEvent(**item))
                except TypeError:  # a trace stored by another version: skip the line
                    continue
            self.trace.finish_turn(turns, m.status)
        return turns
