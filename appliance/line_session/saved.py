"""The line session's sign-in, lock, and how a resumed conversation is shown again (the
conversation itself is ``appliance.conversation``'s, the terminal's too)."""

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


SHOWN = 6  # exchanges shown again on resuming


def show_resumed(resumed) -> None:
    """Show a resumed conversation (``Conversation.resume``'s session and messages) again: its
    title and its last exchanges, or that there was none to resume."""
    if resumed is None:
        print("No saved session to resume: this is a new one.")
        return
    session, messages = resumed
    print(f"Resumed: {session.title}")
    pairs = list(zip(messages[::2], messages[1::2]))
    for question, reply in pairs[-SHOWN:]:
        status = "" if reply.status == "complete" else f" [{reply.status}]"
        print(f"  You: {question.text}\n  Assistant{status}: {reply.text}")
    print()


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
