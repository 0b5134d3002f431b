"""The operator's sign-in policy: ``sign-in.json`` beside the accounts file in the data home
(``appliance user policy``).

Invariants:
- Absent, the policy is the defaults (5 wrong passwords, 15 minutes); a file that cannot be read
  or is not a policy is an ``AccountError`` (one line), never a silent default.
- No environment variable changes it: whoever runs a command must not choose their own lock-out.
- The file is written whole (a temporary file, fsynced, then renamed), mode 0600.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from appliance.accounts.model import AccountError
from common.locations import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, accounts_db_path

POLICY_FILE = "sign-in.json"
MAX_POLICY_FAILURES = 100
MAX_POLICY_MINUTES = 7 * 24 * 60


@dataclass(frozen=True)
class SignInPolicy:
    max_failures: int = 5  # wrong passwords in a row before an account locks
    lockout_minutes: float = 15.0  # how long it stays locked

    def __post_init__(self):
        if isinstance(self.max_failures, bool) or not isinstance(self.max_failures, int) \
                or not 1 <= self.max_failures <= MAX_POLICY_FAILURES:
            raise AccountError(f"the sign-in policy's max_failures is a whole number from 1 to {MAX_POLICY_FAILURES}")
        if isinstance(self.lockout_minutes, bool) or not isinstance(self.lockout_minutes, (int, float)) \
                or not 1 <= self.lockout_minutes <= MAX_POLICY_MINUTES:
            raise AccountError(f"the sign-in policy's lockout_minutes is from 1 to {MAX_POLICY_MINUTES}")


def policy_path(accounts: Path | None = None) -> Path:
    """The policy file beside the accounts file (the data home's, by default)."""
    return (accounts or accounts_db_path()).with_name(POLICY_FILE)


def read_policy(path: Path | None = None) -> SignInPolicy:
    """The operator's sign-in policy; the defaults when the file is absent. A file that cannot
    be read is an ``AccountError`` (one line), never a silent default."""
    path = path or policy_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return SignInPolicy()
    except (OSError, ValueError) as exc:
        raise AccountError(f"{path} cannot be read as the sign-in policy ({type(exc).__name__}); fix it, or set it "
                           "again with `appliance user policy`") from None
    if not isinstance(data, dict) or set(data) - {"max_failures", "lockout_minutes"}:
        raise AccountError(f"{path} is not a sign-in policy (max_failures, lockout_minutes)")
    return SignInPolicy(**data)


def write_policy(policy: SignInPolicy, path: Path | None = None) -> None:
    path = path or policy_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"max_failures": policy.max_failures, "lockout_minutes": policy.lockout_minutes}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
