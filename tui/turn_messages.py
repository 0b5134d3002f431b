"""A running turn's messages in the clinic terminal: its progress, its trace, and how it ends
(answered, failed or cancelled). A mixin of ``ClinicApp``; these handlers run on the UI thread.

Invariants:
- Only checked text reaches the screen: while a turn runs its reply shows the step about to run
  and the elapsed seconds (redrawn on the app's timer, so it moves during a long model call);
  the answer appears whole when the turn is done, after ``appliance.screen_text`` hid any
  patient ID the turn did not read, the clinician did not write and the conversation is not
  about.
- What a turn's end shows and saves is the conversation core's (``Conversation.answered``,
  ``stopped``, ``failed``, the line session's too): a cancelled turn says what it wrote and what
  it did not (``appliance.conversation.turn_outcome``, from the turn's trace); the chart is reloaded after a
  write to it. After an answered turn the core makes the patient it settled on current
  (``Conversation.follow_turn``, as in the line session), shown at once; the new conversation
  that may bring waits for the next question (``tui.patients``).
"""

from __future__ import annotations

import time

from appliance.agent.state import TraceEvent
from appliance.conversation import Conversation
from appliance.conversation.turn_outcome import saved_words, writes_done
from tui import events
from tui.workers import Turn


class TurnMessages:
    turn: Turn | None
    conversation: Conversation

    def _show_progress(self) -> None:
        """The running turn's step and elapsed seconds, redrawn on a timer so the clock moves
        while a model call runs; the answer itself appears only when the turn is done."""
        turn = self.turn
        if turn is not None and turn.started and not turn.cancel.is_set():
            turn.reply.progress(f"{turn.step}… {int(time.monotonic() - turn.began)} s")

    def on_turn_step(self, message: events.TurnStep) -> None:
        turn = self._current(message.turn_id)
        if turn is not None:
            turn.step = message.label
            self._show_progress()

    def on_turn_trace(self, message: events.TurnTrace) -> None:
        self.main.trace.add_event(message.turn_id, message.event)
        event = message.event
        if event.node == "TOOL_EXECUTE" and event.tool:
            self.tool_call_seen(event.tool, (event.output or {}).get("error_type"))
        stats = message.event.model_stats or {}
        if stats.get("tokens_per_second"):
            self.main.status.set_tokens_per_second(stats["tokens_per_second"])

    def on_turn_finished(self, message: events.TurnFinished) -> None:
        turn = self._current(message.turn_id)
        if turn is None:
            return
        if turn.cancel.is_set():  # the scripted model stops quietly; treat it as the cancel it was
            self._finish_cancelled(turn)
            return
        result = message.result
        shown = self.conversation.answered(turn.question, turn.patient_id, result)  # saved, and history
        turn.reply.finish(shown, result.kind, result.disclaimer)
        self.main.trace.finish_turn(turn.id, "complete")
        self._end_turn()
        if not self.follow_turn(result.state):  # tui.patients: the patient the turn settled on
            self._reload_chart_after(self._writes(turn))

    def on_turn_failed(self, message: events.TurnFailed) -> None:
        turn = self._current(message.turn_id)
        if turn is None:
            return
        if message.cancelled or turn.cancel.is_set():
            self._finish_cancelled(turn)
        else:
            self._finish_failed(turn, message.message)

    def _finish_cancelled(self, turn: Turn) -> None:
        trace = self.main.trace.events(turn.id)
        writes, saved = writes_done(trace), saved_words(trace)
        detail = f"cancelled by the clinician; {self.conversation.stopped(turn.question, turn.patient_id, trace)}"
        turn.reply.mark("cancelled", detail)
        self.main.trace.finish_turn(turn.id, "cancelled")
        if saved:
            self.notice(f"The answer was cancelled, but the write you approved was saved to the record: {saved}. "
                        "The cancelled answer is not used as context for later questions.", "warning")
        else:
            self.notice("The answer was cancelled; it is not used as context for later questions.")
        self._end_turn()
        self._reload_chart_after(writes)

    def _writes(self, turn: Turn) -> list[TraceEvent]:
        """The turn's writes that ran (approved and succeeded), from its trace."""
        return writes_done(self.main.trace.events(turn.id))

    def _reload_chart_after(self, writes: list[TraceEvent]) -> None:
        pid = self.conversation.patient_id
        if pid and any((e.args or {}).get("patient_id") == pid for e in writes):
            self._load_chart(pid)

    def _finish_failed(self, turn: Turn, text: str) -> None:
        turn.reply.mark("failed", f"not answered: {text}")
        self.main.trace.finish_turn(turn.id, "failed")
        self.conversation.failed(turn.question, turn.patient_id, self.main.trace.events(turn.id), text)
        self.notice(f"The question could not be answered: {text}", "error")
        self._end_turn()
