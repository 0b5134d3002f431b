"""The clinician's password given again, for an override of a safety finding
(``appliance.safety.policy``): one rule for the terminal, the line session and the host.

``reauthenticate(store, name, password) -> True | False | None``: True when ``name`` is an
enabled account and ``password`` is its password; False when the password is missing or wrong,
the account locked, disabled or unknown, or the store unreadable; None when the appliance has no
clinician accounts at all (there is no password to give). A wrong password counts towards the
account's lock-out like one at sign-in.
"""

from __future__ import annotations

from appliance.accounts.model import AccountError
from appliance.accounts.store import AccountStore


def reauthenticate(store: AccountStore, name: str | None, password: str | None) -> bool | None:
    try:
        if not store.exists():
            return None
    except AccountError:
        return False
    if not name or not password:
        return False
    try:
        store.verify(name, password)
    except AccountError:
        return False
    return True
