"""Sessions for the clinic terminal: opening the sessions store, a new session, resuming one,
exporting one. What an exchange saves, the history and what resuming restores are the
conversation core's (``appliance.conversation.Conversation``, the line session's too); this mixin
of ``ClinicApp`` shows them. It runs on the UI thread. A storage problem is a notice; the
terminal keeps working without saving.
"""

from __future__ import annotations

from appliance.conversation import Conversation
from common.locations import data_home
from tui.export import session_markdown, write_export
from tui.screens.resume import SessionsScreen


class SessionHandling:
    conversation: Conversation

    def _open_store(self) -> None:
        self.conversation = Conversation.in_store(self.profile.name, self._sessions_path,
                                                  report=lambda line: self.notice(line, "error"))
        if self._resume and self.conversation.store is not None:
            # The conversation widgets mount after the app's own on_mount: resume once they have.
            self.call_after_refresh(self.resume_session, self._resume)

    def action_new_session(self) -> None:
        if self.turn is not None:
            self.notice("Cancel the running answer first (Escape).", "warning")
            return
        self.conversation.start_new()
        self._clear_chat()
        self.open_patient(None)
        self.image_path = None
        self.main.attachment.clear()
        self.notice("New session started.")

    def _clear_chat(self) -> None:
        """The conversation set aside (it stays saved) leaves the screen."""
        self.main.chat.clear()
        self.main.trace.clear_turns()

    def action_sessions(self) -> None:
        if self.turn is not None:
            self.notice("Cancel the running answer first (Escape).", "warning")
            return
        store = self.conversation.store
        sessions = self.conversation.store_call(store.list_sessions) if store is not None else None
        if sessions is None:
            self.notice("No saved sessions are available.", "warning")
            return
        self.push_screen(SessionsScreen(sessions), callback=lambda sid: sid and self.resume_session(sid))

    def resume_session(self, target: str) -> None:
        """Reopen a saved session ("latest" or its ID) on the screen: the core restores it."""
        resumed = self.conversation.resume(target)
        if resumed is None:
            return
        session, messages = resumed
        self._turn_ids = self.main.show_stored(messages)
        self._show_patient(session.patient_id)
        self.notice(f"Resumed: {session.title}")

    def action_export_session(self) -> None:
        """Save the current conversation as Markdown beside the sessions database (exports/)."""
        store, current = self.conversation.store, self.conversation.session
        if current is None or store is None:
            self.notice("Nothing to export yet: ask a question first.", "warning")
            return
        session = self.conversation.store_call(store.get_session, current.id)
        messages = self.conversation.store_call(store.messages, current.id)
        if session is None or messages is None:
            return
        folder = (self._sessions_path.parent if self._sessions_path else data_home()) / "exports"
        try:
            path = write_export(folder, session, session_markdown(session, messages, self.profile.notice))
        except OSError as exc:
            self.notice(f"The conversation could not be exported: {exc.strerror}", "error")
            return
        self.notice(f"Conversation exported to {path}")

