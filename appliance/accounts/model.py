"""What a clinician account is and may hold: the errors, the ``Account`` record, and the checks
on names, passwords, display names and roles (``appliance.accounts`` states the invariants).

Invariant: every check either returns the cleaned value or raises ``AccountError`` with a
one-line message that never repeats a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common.errors import ApplianceError

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
MIN_PASSWORD_CHARS = 8
MAX_PASSWORD_CHARS = 1024
MAX_DISPLAY_CHARS = 100
MAX_ROLE_CHARS = 40
WRONG = "Unknown clinician or wrong password."


class AccountError(ApplianceError):
    """An account could not be created, changed or read."""


class SignInRefused(AccountError):
    """A sign-in was refused (unknown name, wrong password, disabled or locked account)."""


class AccountLocked(SignInRefused):
    """The account is locked after too many wrong passwords."""


@dataclass(frozen=True)
class Account:
    name: str
    display_name: str | None
    role: str | None
    enabled: bool
    created_at: str
    last_sign_in_at: str | None
    failed_attempts: int
    locked_until: str | None

    @property
    def label(self) -> str:
        """How the terminal names the clinician: 'Dr. Ada Okafor (aokafor)', or the name alone."""
        return f"{self.display_name} ({self.name})" if self.display_name else self.name

    def to_json(self) -> dict:
        return {"name": self.name, "display_name": self.display_name, "role": self.role,
                "enabled": self.enabled, "created_at": self.created_at,
                "last_sign_in_at": self.last_sign_in_at, "locked_until": self.locked_until}


# -- validation ------------------------------------------------------------------------------
def check_name(name: str) -> str:
    name = (name or "").strip()
    if not NAME_PATTERN.fullmatch(name):
        raise AccountError("an account name is 1-64 letters, digits, '.', '_', '@' or '-', "
                           "starting with a letter or digit")
    return name


def check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_CHARS:
        raise AccountError(f"a password needs at least {MIN_PASSWORD_CHARS} characters")
    if len(password) > MAX_PASSWORD_CHARS or any(c in password for c in "\r\n\x00"):
        raise AccountError(f"a password is one line of at most {MAX_PASSWORD_CHARS} characters")
    return password


def optional_text(what: str, value: str | None, limit: int) -> str | None:
    value = " ".join((value or "").split())
    if not value:
        return None
    if len(value) > limit or not value.isprintable():
        raise AccountError(f"the {what} is at most {limit} printable characters")
    return value
