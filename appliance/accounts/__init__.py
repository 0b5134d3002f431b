"""Clinician accounts: who may sign in to the clinic terminal and the line session, and whose
name an EHR write carries.

Invariants:
- One SQLite file, ``accounts.sqlite`` in the data home (``common.locations``), created with
  mode 0600 (SQLite gives its journal files the same mode); schema changes are named,
  append-only migrations under the set ``accounts`` (``common.sqlite``).
- Passwords are kept only as Argon2id hashes made by argon2-cffi's ``PasswordHasher`` with its
  defaults; a hash made with older parameters is replaced at the next successful sign-in
  (``check_needs_rehash``). No password is ever logged, stored in clear or put in a message.
- Lock-out: after ``max_failures`` wrong passwords in a row an account is locked for
  ``lockout_minutes``, recorded in the file, so every terminal and the line session honour
  it; while locked the password is not even checked. A successful sign-in clears the count.
  An attempt is counted, and the lock taken when it is the last one allowed, in one write
  transaction before its password is checked (``_take_attempt``), so any number of attempts
  at once check at most ``max_failures`` passwords before the lock refuses the rest.
- The policy (``max_failures``, ``lockout_minutes``) is the operator's: ``sign-in.json`` beside
  the accounts file in the data home (``appliance user policy``), defaults when absent. No
  environment variable changes it: whoever runs a command must not choose their own
  lock-out.
- Every sign-in attempt and every change to an account is recorded in ``account_events``
  (time, account name as typed, event); never a password.
- Names are case-insensitive and unique; the stored spelling is the one EHR writes carry.
- Reading whether accounts exist never creates the file: a machine with no accounts stays in
  the no-account mode (writes attributed to the operator, README "Clinician sign-in").
  ``appliance init`` creates it empty (``prepare``) for its ``record_heads`` table: a copy of
  the EHR's chain head (``ehr_db.heads``), which an empty file does not make an account.

The package: ``model`` (errors, the account record, the checks), ``policy`` (the operator's
lock-out policy file), ``store`` (the SQLite store and signing in); callers import these from
here. Beside them, imported by their own paths: ``sign_in`` (reading a clinician's password on
the command line) and ``sessions`` (the conversations the terminal and the line session save,
the other local store that keeps a copy of the EHR's chain head).
"""

from appliance.accounts.model import (
    MAX_DISPLAY_CHARS,
    MAX_PASSWORD_CHARS,
    MAX_ROLE_CHARS,
    MIN_PASSWORD_CHARS,
    NAME_PATTERN,
    WRONG,
    Account,
    AccountError,
    AccountLocked,
    SignInRefused,
    check_name,
    check_password,
)
from appliance.accounts.policy import (
    MAX_POLICY_FAILURES,
    MAX_POLICY_MINUTES,
    POLICY_FILE,
    SignInPolicy,
    policy_path,
    read_policy,
    write_policy,
)
from appliance.accounts.store import MIGRATIONS, STORE, AccountStore

__all__ = [
    "MAX_DISPLAY_CHARS", "MAX_PASSWORD_CHARS", "MAX_POLICY_FAILURES", "MAX_POLICY_MINUTES", "MAX_ROLE_CHARS",
    "MIGRATIONS", "MIN_PASSWORD_CHARS", "NAME_PATTERN", "POLICY_FILE", "STORE", "WRONG", "Account",
    "AccountError", "AccountLocked", "AccountStore", "SignInPolicy", "SignInRefused", "check_name",
    "check_password", "policy_path", "read_policy", "write_policy",
]
