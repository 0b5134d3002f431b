"""The main screen: conversation and prompt on the left, the patient chart on the right, the
reasoning trace below, the status line on top and the key footer at the bottom.

Invariant: the screen only lays widgets out and holds the bindings; the app owns all state
and talks to the widgets through the attributes created here.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer

from appliance.agent.state import TraceEvent
from appliance.sessions import StoredMessage
from tui.actions import bindings
from tui.widgets.attachment_bar import AttachmentBar
from tui.widgets.chat_log import ChatLog
from tui.widgets.patient_panel import PatientPanel
from tui.widgets.question_input import QuestionInput
from tui.widgets.status_bar import StatusBar
from tui.widgets.trace_panel import TracePanel


class MainScreen(Screen):
    BINDINGS = bindings()
    AUTO_FOCUS = "QuestionInput"

    def __init__(self, profile: str, cursor_blink: bool = True) -> None:
        super().__init__()
        self.status = StatusBar(profile, id="status")
        self.chat = ChatLog(id="chat")
        self.attachment = AttachmentBar(id="attachment")
        self.prompt = QuestionInput(id="prompt")
        self.prompt.cursor_blink = cursor_blink
        self.patient = PatientPanel(id="patient")
        self.trace = TracePanel(id="trace")
        self.trace.border_title = "Reasoning trace (Ctrl+T hides; Enter expands a line)"

    def compose(self) -> ComposeResult:
        yield self.status
        with Horizontal(id="main"):
            with Vertical(id="conversation"):
                yield self.chat
                yield self.attachment
                yield self.prompt
            yield self.patient
        yield self.trace
        yield Footer(compact=True, show_command_palette=False)  # Ctrl+P is in help: 80 columns

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
            reply.finish(m.text, m.kind if m.kind in ("answer", "clarification", "notice") else "answer")
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
