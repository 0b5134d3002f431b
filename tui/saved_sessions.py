"""Sessions for the clinic terminal: every exchange saved to SQLite, a new session, resuming one.

A mixin of ``ClinicApp``: runs on the UI thread and owns ``store``, ``session`` and
``history``. ``history`` holds only complete exchanges, so a cancelled or failed answer is
never context for a later question. A storage problem is a notice; the terminal keeps working
without saving.
"""

from __future__ import annotations

from appliance.accounts.sessions import Session, SessionStore, SessionStoreError
from appliance.conversation import turn_patients
from common.locations import data_home
from tui.export import session_markdown, write_export
from tui.screens.resume import SessionsScreen
from tui.workers import Turn


class SessionHandling:
    store: SessionStore | None
    session: Session | None
    context_patients: set[str]  # every patient the current conversation has touched

    def _open_store(self) -> None:
        try:
            self.store = SessionStore(self._sessions_path)
        except SessionStoreError as exc:
            self.notice(f"Sessions will not be saved: {exc}", "error")
        if self._resume and self.store is not None:
            target = self._resume
            if target == "latest":
                latest = self._store_call(self.store.latest_session)
                target = latest.id if latest else None
            if target:
                # The conversation widgets mount after the app's own on_mount: resume once they have.
                self.call_after_refresh(self.resume_session, target)

    def _store_call(self, fn, *args, **kwargs):
        if self.store is None:
            return None
        try:
            return fn(*args, **kwargs)
        except SessionStoreError as exc:
            self.notice(f"Session storage problem: {exc}", "error")
            return None

    def _save(self, turn: Turn, reply: str, kind: str, status: str, trace: list[dict]) -> None:
        self.context_patients |= turn_patients(turn.patient_id, trace)
        if self.store is None:
            return
        if self.session is None:
            self.session = self._store_call(self.store.create_session, model=self.profile.name,
                                            patient_id=turn.patient_id)
        if self.session is not None:
            self._store_call(self.store.add_exchange, self.session.id, turn.question, reply, kind=kind,
                             status=status, patient_id=turn.patient_id, trace=trace)

    def action_new_session(self) -> None:
        if self.turn is not None:
            self.notice("Cancel the running answer first (Escape).", "warning")
            return
        self._clear_context()
        self._set_patient(None)
        self.image_path = None
        self.main.attachment.clear()
        self.notice("New session started.")

    def _clear_context(self) -> None:
        """Forget the conversation (it stays saved): the next question starts a new session."""
        self.session, self.history, self.context_patients = None, [], set()
        self.main.chat.clear()
        self.main.trace.clear_turns()

    def action_sessions(self) -> None:
        if self.turn is not None:
            self.notice("Cancel the running answer first (Escape).", "warning")
            return
        sessions = self._store_call(self.store.list_sessions) if self.store else None
        if sessions is None:
            self.notice("No saved sessions are available.", "warning")
            return
        self.push_screen(SessionsScreen(sessions), callback=lambda sid: sid and self.resume_session(sid))

    def resume_session(self, session_id: str) -> None:
        session = self._store_call(self.store.get_session, session_id)
        messages = self._store_call(self.store.messages, session_id)
        if session is None or messages is None:
            return
        self.session = session
        self.history = [(m.role, m.text) for m in messages if m.status == "complete"]
        self.context_patients = set(session.patient_ids)
        self._turn_ids = self.main.show_stored(messages)
        self._set_patient(session.patient_id, persist=False)
        self.notice(f"Resumed: {session.title}")

    def action_export_session(self) -> None:
        """Save the current conversation as Markdown beside the sessions database (exports/)."""
        if self.session is None or self.store is None:
            self.notice("Nothing to export yet: ask a question first.", "warning")
            return
        session = self._store_call(self.store.get_session, self.session.id)
        messages = self._store_call(self.store.messages, self.session.id)
        if session is None or messages is None:
            return
        folder = (self._sessions_path.parent if self._sessions_path else data_home()) / "exports"
        try:
            path = write_export(folder, session, session_markdown(session, messages, self.profile.notice))
        except OSError as exc:
            self.notice(f"The conversation could not be exported: {exc.strerror}", "error")
            return
        self.notice(f"Conversation exported to {path}")

