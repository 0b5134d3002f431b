"""Trial prescreen of the open patient (F6, or "Prescreen" in the command palette).

A mixin of ``ClinicApp``: the action runs on the UI thread and starts the prescreen as a turn
(``appliance.prescreen.run``) in a thread worker that only posts messages; the result arrives as
an ordinary ``TurnFinished``, so it is shown as the assistant's message, saved with the session
and kept as context for follow-up questions, and Escape cancels it like any answer.

Invariants:
- Only for the open patient, only when no other turn runs (llama.cpp serves one caller), and
  only once the model and the clinical data services are up; otherwise a notice says why.
- The worker never touches widgets; progress ("NCT01234567: criterion 3 of 12") comes as
  ``PrescreenProgress`` and is shown in the waiting message.
- The answer opens with the verdicts (``render_text``), and when it is shown
  (``PrescreenShown``, posted after the turn's ``TurnFinished``) the conversation scrolls so its
  top, the verdicts, is in view: the patient facts follow below, a scroll away.
- The disclaimer is shown once, as the answer's footnote (``render_text`` leaves it out).
"""

from __future__ import annotations

import threading

from textual import work
from textual.message import Message

from appliance.conversation import CodeAnswer
from appliance.prescreen.run import DISCLAIMER

TUI_MAX_TRIALS = 3
FOOTNOTE = DISCLAIMER


class PrescreenProgress(Message):
    def __init__(self, turn_id: int, text: str) -> None:
        super().__init__()
        self.turn_id = turn_id
        self.text = text


class PrescreenShown(Message):
    """The prescreen turn's answer has been handed to the conversation (its ``TurnFinished``
    came first): bring its top into view."""

    def __init__(self, turn_id: int) -> None:
        super().__init__()
        self.turn_id = turn_id



class PrescreenHandling:
    def action_prescreen(self) -> None:
        if self.conversation.patient_id is None:
            self.notice("Open a patient first (Ctrl+O): the prescreen checks the open patient's chart.", "warning")
            return
        if self.turn is not None:
            self.notice("An answer is still being written: wait for it, or press Escape to cancel it.", "warning")
            return
        if self.model is None or self.tools is None:
            why = self.model_error or self.tools_error or "still starting"
            self.notice(f"The prescreen needs the model and the clinical data services ({why}).", "warning")
            return
        name = ((self.chart or {}).get("patient") or {}).get("name")
        question = f"Prescreen {name + ' (' + self.conversation.patient_id + ')' if name else self.conversation.patient_id} for clinical trials"
        turn = self._new_turn(question, "Prescreening: reading the chart…")
        self._prescreen_replies = {**getattr(self, "_prescreen_replies", {}), turn.id: turn.reply}
        self._begin(turn)
        turn.step = "Prescreening: reading the chart"  # the progress line's step (ClinicApp._show_progress)
        self._run_prescreen(turn.id, turn.patient_id, turn.cancel)

    @work(thread=True, group="turn", exit_on_error=False)
    def _run_prescreen(self, turn_id: int, patient_id: str, cancel: threading.Event) -> None:
        from appliance.prescreen.run import render_text, run_prescreen

        def prescreen() -> CodeAnswer:
            result = run_prescreen(
                self.model, self.tools, patient_id, max_trials=TUI_MAX_TRIALS,
                deadline=self.settings.tool_deadline_seconds, cancel=cancel,
                progress=lambda text: self.post_message(PrescreenProgress(turn_id, text)),
            )
            return CodeAnswer(render_text(result, disclaimer=False), disclaimer=FOOTNOTE)

        self._post_outcome(turn_id, cancel, prescreen)
        self.post_message(PrescreenShown(turn_id))

    def on_prescreen_progress(self, message: PrescreenProgress) -> None:
        turn = self._current(message.turn_id)
        if turn is not None and not turn.cancel.is_set():
            turn.step = f"Prescreening: {message.text}"
            self._show_progress()

    def on_prescreen_shown(self, message: PrescreenShown) -> None:
        reply = getattr(self, "_prescreen_replies", {}).pop(message.turn_id, None)
        if reply is None or not reply.is_attached or reply.kind != "answer":
            return  # cancelled, failed or cleared: nothing to bring into view
        chat = self.main.chat
        chat.call_after_refresh(chat.scroll_to_widget, reply, animate=False, top=True)
