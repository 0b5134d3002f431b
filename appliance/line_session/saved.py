"""The line session's sign-in, lock and saved conversation (the terminal's sessions store)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from common.operator import operator_name

if TYPE_CHECKING:
    from appliance.config import Settings


def session_clinician(settings: Settings):
    """Sign the clinician in when accounts exist: (account or None, the account store, the line
    saying who writes)."""
    from appliance.accounts import AccountStore
    from appliance.accounts.sign_in import line_sign_in

    store = AccountStore.from_settings(settings)
    if not store.exists():
        return None, store, (f"No clinician accounts on this appliance: writes are attributed to the operator, "
                             f"{operator_name()} (`appliance user add NAME` creates an account).")
    account = line_sign_in(store)
    return account, store, f"Signed in as {account.label}: your writes carry your name."


class SavedConversation:
    """The line session's conversation in the terminal's sessions store (``appliance.accounts.sessions``)."""

    SHOWN = 6  # exchanges shown again on resuming

    def __init__(self, model: str, path=None):
        from appliance.accounts.sessions import SessionStore, SessionStoreError

        self.model, self.session, self.store = model, None, None
        try:
            self.store = SessionStore(path)
        except SessionStoreError as exc:
            print(f"[this conversation will not be saved: {exc}]")

    def _call(self, fn, *args, **kwargs):
        from appliance.accounts.sessions import SessionStoreError

        try:
            return fn(*args, **kwargs)
        except SessionStoreError as exc:
            print(f"[session storage problem: {exc}]")
            return None

    def reopen(self, target: str) -> tuple[list[tuple[str, str]], str | None]:
        """Show a saved session again ("latest" or an ID); its history and patient."""
        session = self.store.latest_session() if target == "latest" else self.store.get_session(target)
        if session is None:
            print("No saved session to resume: this is a new one.")
            return [], None
        self.session = session
        messages = self.store.messages(session.id)
        print(f"Resumed: {session.title}")
        pairs = list(zip(messages[::2], messages[1::2]))
        for question, reply in pairs[-self.SHOWN:]:
            status = "" if reply.status == "complete" else f" [{reply.status}]"
            print(f"  You: {question.text}\n  Assistant{status}: {reply.text}")
        print()
        return [(m.role, m.text) for m in messages if m.status == "complete"], session.patient_id

    def start_new(self) -> None:
        """The next exchange starts a new saved session (this one stays saved)."""
        self.session = None

    def save(self, question: str, reply: str, *, kind: str, status: str, patient_id: str | None,
             trace: list[dict]) -> None:
        if self.store is None:
            return
        if self.session is None:
            self.session = self._call(self.store.create_session, model=self.model, patient_id=patient_id)
        if self.session is not None:
            self._call(self.store.add_exchange, self.session.id, question, reply, kind=kind, status=status,
                       patient_id=patient_id, trace=trace)


def resume_problem(resume: str | None) -> str | None:
    """Why ``--session ID`` cannot be reopened (before anything starts), or None."""
    from appliance.accounts.sessions import SessionStore, SessionStoreError

    if resume is None or resume == "latest":
        return None
    try:
        SessionStore().get_session(resume)
    except SessionStoreError as exc:
        return f"cannot reopen session {resume}: {exc}"
    return None


def lock(account, store) -> bool:
    """``/lock``: the screen cleared until the clinician's password; False when signed out."""
    from appliance.accounts.sign_in import line_unlock

    if sys.stdout.isatty():
        print("\033[2J\033[3J\033[H", end="", flush=True)  # the screen and its scrollback
    print(f"Locked ({account.label}).", flush=True)
    if not line_unlock(store, account):
        print("Signed out: the session has ended.")
        return False
    print(f"Unlocked: {account.label}.\n")
    return True
