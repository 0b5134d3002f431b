"""Signing a clinician in from the command line: the line session, headless writes, and the
passwords the ``appliance user`` commands read.

Invariants:
- A password is read with ``getpass`` on a terminal (never echoed), else as one line of
  standard input (scripts, tests); never from the command line or the environment (the MCP
  servers inherit the environment). It is passed to the account store and dropped. Bytes
  that are not UTF-8 text are one clear refusal (``AccountError``), never a traceback.
- Headless writes (``ask --approve-writes``) need a clinician: ``--clinician NAME`` or
  ``$APPLIANCE_USER`` naming an enabled local account, and that account's password, so no
  script writes in a clinician's name without it. The lock-out counts these attempts too.
"""

from __future__ import annotations

import getpass
import sys
from typing import TextIO

from appliance.accounts import (
    WRONG,
    Account,
    AccountError,
    AccountLocked,
    AccountStore,
    SignInRefused,
    check_password,
)
from appliance.config import Settings
from common import environment

SIGN_IN_ATTEMPTS = 3  # prompts per line-session start on a terminal (the lock-out still counts each)


class ClinicianRequired(AccountError):
    """A write was asked for without a clinician who can sign in."""


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


NOT_TEXT = "the password is not UTF-8 text (check the terminal's or the script's encoding)"


def _text(read) -> str:
    """``read()``, with bytes that are not UTF-8 refused in one line."""
    try:
        password = read()
    except UnicodeDecodeError:
        raise AccountError(NOT_TEXT) from None
    if any("\udc80" <= c <= "\udcff" for c in password):  # undecodable bytes, escaped (surrogateescape)
        raise AccountError(NOT_TEXT)
    return password


def read_password(prompt: str = "Password: ", stdin: TextIO | None = None) -> str:
    """One password: hidden on a terminal, else the next line of standard input."""
    stdin = stdin if stdin is not None else sys.stdin
    if _is_terminal(stdin):
        return _text(lambda: getpass.getpass(prompt))
    line = _text(stdin.readline) if stdin is not None else ""
    if not line:
        raise SignInRefused("no password was given on standard input")
    return line.rstrip("\r\n")


def read_new_password(stdin: TextIO | None = None) -> str:
    """A new password: typed twice on a terminal, else one line of standard input; checked."""
    stdin = stdin if stdin is not None else sys.stdin
    if not _is_terminal(stdin):
        return check_password(read_password(stdin=stdin))
    first = check_password(_text(lambda: getpass.getpass("New password: ")))
    if _text(lambda: getpass.getpass("Type it again: ")) != first:
        raise AccountError("the two passwords differ; nothing was changed")
    return first


def headless_clinician(settings: Settings, name: str | None, store: AccountStore | None = None,
                       stdin: TextIO | None = None) -> Account:
    """The clinician of a headless write run, signed in with their password, or
    ``ClinicianRequired`` (nothing is built or written before this returns)."""
    name = (name or environment.read(environment.USER)).strip()
    if not name:
        raise ClinicianRequired("--approve-writes needs a clinician: pass --clinician NAME (or set APPLIANCE_USER) "
                                "naming a local account, with its password on standard input")
    store = store or AccountStore.from_settings(settings)
    if not store.exists():
        raise ClinicianRequired(f"--approve-writes needs a local clinician account, and this appliance has none: "
                                f"create one with `appliance user add {name}`")
    try:
        return store.verify(name, read_password(f"Password for {name}: ", stdin))
    except AccountError as exc:  # a refusal, a password that is not text, an unreadable store
        raise ClinicianRequired(f"no write without a signed-in clinician: {exc}") from None


def refusal_words(locked: bool, max_failures: int, lockout_minutes: float, left: int | None) -> str:
    """What a wrong password says: the policy at sign-in (saying more would tell which names
    exist), the tries left before the lock where the name is fixed (a locked terminal)."""
    minutes = f"{lockout_minutes:g} minute{'s' if lockout_minutes != 1 else ''}"
    policy = f"After {max_failures} wrong passwords in a row an account locks for {minutes}."
    if not locked:
        return f"{WRONG} {policy}"
    if left is None:
        return f"Wrong password. {policy}"
    return (f"Wrong password: {left} {'try' if left == 1 else 'tries'} left before the account locks "
            f"for {minutes}.")


def tries_left(store: AccountStore, name: str) -> int | None:
    """Wrong passwords the account may still take before it locks (None: unknown or locked)."""
    account = store.get(name)
    if account is None or account.locked_until:
        return None
    return max(0, store.max_failures - account.failed_attempts)


def said(store: AccountStore, exc: AccountError, locked_name: str | None = None) -> str:
    """The line a refusal shows: a wrong password warns of the lock; anything else is the store's."""
    if not isinstance(exc, SignInRefused) or isinstance(exc, AccountLocked) or str(exc) != WRONG:
        return str(exc)
    left = None
    if locked_name is not None:
        try:
            left = tries_left(store, locked_name)
        except AccountError:
            left = None
    return refusal_words(locked_name is not None, store.max_failures, store.lockout.total_seconds() / 60, left)


def line_unlock(store: AccountStore, account: Account, stdin: TextIO | None = None) -> bool:
    """The line session's lock: only ``account``'s password continues it. False when no one
    unlocked (end of input, the account locked, or a script's one wrong line): sign out."""
    stdin = stdin if stdin is not None else sys.stdin
    while True:
        try:
            store.verify(account.name, read_password(f"Locked. Password for {account.name} "
                                                     "(Ctrl+D signs out): ", stdin))
            return True
        except AccountLocked as exc:
            print(str(exc), flush=True)
            return False
        except AccountError as exc:
            if "no password was given" in str(exc):
                return False
            print(said(store, exc, account.name), flush=True)
        except (EOFError, KeyboardInterrupt):
            print()
            return False


def line_sign_in(store: AccountStore, stdin: TextIO | None = None, attempts: int = SIGN_IN_ATTEMPTS) -> Account:
    """Ask for the clinician's name and password (the line session's start). On a terminal up to
    ``attempts`` tries; from a script one. Raises ``SignInRefused`` when no one signed in."""
    stdin = stdin if stdin is not None else sys.stdin
    tries = attempts if _is_terminal(stdin) else 1
    problem = "no clinician signed in"
    print("Offline clinical assistant: sign in with your clinician account.", flush=True)
    for _ in range(tries):
        print("Clinician: ", end="", flush=True)
        try:
            line = _text(stdin.readline) if stdin is not None else ""
        except AccountError:  # a name (or what follows it) that is not text names no one: the next try
            problem = "what was typed is not UTF-8 text (check the terminal's or the script's encoding)"
            print(problem, flush=True)
            continue
        if not line:
            print()
            break
        name = line.strip()
        if not name:
            continue
        try:
            return store.verify(name, read_password("Password: ", stdin))
        except AccountError as exc:  # a wrong password, a disabled or locked account, a password not text
            problem = said(store, exc)
            print(problem, flush=True)
    raise SignInRefused(f"the session needs a signed-in clinician: {problem}")
