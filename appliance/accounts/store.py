"""The account store: one SQLite file of accounts and account events, its migrations, and
signing in with the lock-out (``appliance.accounts`` states the invariants).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlite_utils import Database

from appliance.accounts.model import (
    MAX_DISPLAY_CHARS,
    MAX_ROLE_CHARS,
    WRONG,
    Account,
    AccountError,
    AccountLocked,
    SignInRefused,
    check_name,
    check_password,
    optional_text,
)
from appliance.accounts.policy import policy_path, read_policy
from appliance.config import Settings
from common import sqlite
from common.locations import PRIVATE_DIR_MODE, accounts_db_path
from common.sqlite import Migration, write_transaction
from ehr_db import heads

STORE = "accounts"


# -- migrations ------------------------------------------------------------------------------
MIGRATIONS: list[Migration] = []
migration = sqlite.migration_collector(MIGRATIONS)


@migration
def m001_accounts(db: Database) -> None:
    db.execute("""
        CREATE TABLE accounts (
            name TEXT PRIMARY KEY COLLATE NOCASE,
            display_name TEXT,
            role TEXT,
            password_hash TEXT NOT NULL,
            enabled INTEGER NOT NULL DEFAULT 1,
            failed_attempts INTEGER NOT NULL DEFAULT 0,
            locked_until TEXT,
            created_at TEXT NOT NULL,
            password_changed_at TEXT NOT NULL,
            last_sign_in_at TEXT
        )""")
    db.execute("""
        CREATE TABLE account_events (
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            name TEXT NOT NULL,
            event TEXT NOT NULL
        )""")


@migration
def m002_record_heads(db: Database) -> None:
    """A copy of the EHR's chain head, kept outside the record so a rolled-back record shows
    (``ehr_db.heads`` writes and reads it after each EHR commit, with this exact shape)."""
    db.execute(heads.CREATE_TABLE)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(microsecond=0).isoformat()


class _Disabled(SignInRefused):
    """A disabled account's sign-in: said as such only when the password was right."""

    def __init__(self, message: str, hashed: str):
        super().__init__(message)
        self.hashed = hashed


# -- the store -------------------------------------------------------------------------------
class AccountStore:
    """Clinician accounts in one SQLite file (one short connection per call)."""

    def __init__(self, path: Path | str | None = None, *, max_failures: int = 5, lockout_minutes: float = 15.0,
                 clock: Callable[[], datetime] = _utc_now, hasher=None):
        self.path = Path(path) if path is not None else accounts_db_path()
        self.max_failures = max(1, int(max_failures))
        self.lockout = timedelta(minutes=lockout_minutes)
        self._clock = clock
        self._hasher = hasher  # argon2.PasswordHasher; made on first use (tests pass a cheap one)
        self._migrated = False
        self._dummy: str | None = None  # a hash to check unknown names against

    @classmethod
    def from_settings(cls, settings: Settings, path: Path | str | None = None) -> AccountStore:
        """The store in the data home (or at ``path``) with the operator's policy file beside it;
        ``settings`` holds nothing about sign-in (see the module docstring)."""
        path = Path(path) if path is not None else accounts_db_path()
        policy = read_policy(policy_path(path))
        return cls(path, max_failures=policy.max_failures, lockout_minutes=policy.lockout_minutes)

    @property
    def hasher(self):
        if self._hasher is None:
            from argon2 import PasswordHasher

            self._hasher = PasswordHasher()
        return self._hasher

    # -- files ---------------------------------------------------------------------------
    @contextmanager
    def _db(self, *, read_only: bool = False) -> Iterator[Database]:
        """A connection (``common.sqlite.connect`` creates a missing file 0600), migrated once."""
        try:
            if not read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
            db = sqlite.connect(self.path, read_only=read_only)
        except OSError as exc:
            raise AccountError(f"cannot create {self.path.name}: {exc.strerror}") from None
        except sqlite.DatabaseCorrupt as exc:
            raise AccountError(str(exc)) from None
        except sqlite3.Error as exc:
            raise AccountError(f"cannot open the account database ({type(exc).__name__})") from None
        try:
            if not read_only and not self._migrated:
                sqlite.migrate(db, STORE, MIGRATIONS)
                self._migrated = True
            yield db
        except sqlite3.Error as exc:
            raise AccountError(f"the account database failed ({type(exc).__name__})") from None
        finally:
            db.close()

    def prepare(self) -> None:
        """Create the file (0600) and bring its schema up to date without adding an account
        (``appliance init``: the EHR's chain head is then copied here, ``ehr_db.heads``)."""
        with self._db():
            pass

    def record_heads(self) -> list[dict]:
        """The copies of the EHR's chain head kept here (``ehr_db.heads``)."""
        if not self.path.exists():
            return []
        with self._db(read_only=True) as db:
            if "record_heads" not in db.table_names():
                return []
            return [dict(r) for r in db.query("SELECT * FROM record_heads ORDER BY at")]

    def exists(self) -> bool:
        """Whether any account (enabled or not) exists: then signing in is required."""
        if not self.path.exists():
            return False
        with self._db(read_only=True) as db:
            if "accounts" not in db.table_names():
                return False
            return db.execute("SELECT count(*) FROM accounts").fetchone()[0] > 0

    # -- reading -------------------------------------------------------------------------
    @staticmethod
    def _account(row: sqlite3.Row | tuple) -> Account:
        name, display, role, enabled, created, last, failed, locked = row
        return Account(name, display, role, bool(enabled), created, last, failed, locked)

    _COLUMNS = "name, display_name, role, enabled, created_at, last_sign_in_at, failed_attempts, locked_until"

    def get(self, name: str) -> Account | None:
        if not self.path.exists():
            return None
        with self._db() as db:
            row = db.execute(f"SELECT {self._COLUMNS} FROM accounts WHERE name = ?", [name.strip()]).fetchone()
        return self._account(row) if row else None

    def list(self) -> list[Account]:
        if not self.path.exists():
            return []
        with self._db() as db:
            rows = db.execute(f"SELECT {self._COLUMNS} FROM accounts ORDER BY name").fetchall()
        return [self._account(r) for r in rows]

    def _require(self, db: Database, name: str) -> str:
        row = db.execute("SELECT name FROM accounts WHERE name = ?", [name.strip()]).fetchone()
        if row is None:
            raise AccountError(f"no account named {name.strip()!r}")
        return row[0]

    def _event(self, db: Database, name: str, event: str) -> None:
        db.execute("INSERT INTO account_events (at, name, event) VALUES (?, ?, ?)",
                   [_iso(self._clock()), name[:64], event])

    # -- administration ------------------------------------------------------------------
    def add(self, name: str, password: str, display_name: str | None = None, role: str | None = None) -> Account:
        name = check_name(name)
        display = optional_text("display name", display_name, MAX_DISPLAY_CHARS)
        role = optional_text("role", role, MAX_ROLE_CHARS)
        hashed = self.hasher.hash(check_password(password))
        now = _iso(self._clock())
        with self._db() as db, write_transaction(db):
            if db.execute("SELECT 1 FROM accounts WHERE name = ?", [name]).fetchone():
                raise AccountError(f"an account named {name!r} already exists")
            db.execute("INSERT INTO accounts (name, display_name, role, password_hash, created_at, "
                       "password_changed_at) VALUES (?, ?, ?, ?, ?, ?)", [name, display, role, hashed, now, now])
            self._event(db, name, "added")
        return self.get(name)

    def set_enabled(self, name: str, enabled: bool) -> Account:
        with self._db() as db, write_transaction(db):
            stored = self._require(db, name)
            db.execute("UPDATE accounts SET enabled = ? WHERE name = ?", [int(enabled), stored])
            self._event(db, stored, "enabled" if enabled else "disabled")
        return self.get(stored)

    def set_password(self, name: str, password: str) -> Account:
        """A new password; it also lifts a lock-out."""
        hashed = self.hasher.hash(check_password(password))
        with self._db() as db, write_transaction(db):
            stored = self._require(db, name)
            db.execute("UPDATE accounts SET password_hash = ?, password_changed_at = ?, failed_attempts = 0, "
                       "locked_until = NULL WHERE name = ?", [hashed, _iso(self._clock()), stored])
            self._event(db, stored, "password_set")
        return self.get(stored)

    # -- signing in ----------------------------------------------------------------------
    def verify(self, name: str, password: str) -> Account:
        """The account, when ``name`` and ``password`` sign in; otherwise ``SignInRefused``."""
        from argon2.exceptions import InvalidHashError, VerificationError

        typed = " ".join((name or "").split())[:64]
        if not typed or not self.exists():
            raise SignInRefused(WRONG)
        try:
            stored, hashed, lock = self._take_attempt(typed)
        except _Disabled as disabled:  # said only to whoever knows the password: names are not probed
            try:
                self.hasher.verify(disabled.hashed, password)
            except (VerificationError, InvalidHashError):
                raise SignInRefused(WRONG) from None
            raise SignInRefused(str(disabled)) from None
        if stored is None:
            self._dummy_verify(password)  # about the same time as a real check: names are not probed by timing
            raise SignInRefused(WRONG)
        try:
            self.hasher.verify(hashed, password)
        except (VerificationError, InvalidHashError):
            self._failed(stored, lock)
        return self._succeeded(stored, password, hashed, lock)

    def _take_attempt(self, typed: str) -> tuple[str | None, str | None, str | None]:
        """Count one attempt before its password is checked, in one write transaction: refuse a
        locked or disabled account; lock the account when this is the last attempt allowed.
        Returns (stored name, hash, the lock this attempt took), or (None, None, None) for an
        unknown name. A refusal is recorded, then raised."""
        now = self._clock()
        refusal: SignInRefused | None = None
        taken: tuple[str | None, str | None, str | None] = (None, None, None)
        with self._db() as db, write_transaction(db):
            row = db.execute("SELECT name, password_hash, enabled, locked_until, failed_attempts FROM accounts "
                             "WHERE name = ?", [typed]).fetchone()
            if row is None:
                self._event(db, "(unknown)", "sign_in_unknown")  # not what was typed: it may be a password
                return taken
            stored, hashed, enabled, locked_until, failed = row
            if locked_until and datetime.fromisoformat(locked_until) > now:
                self._event(db, stored, "sign_in_locked")
                refusal = AccountLocked(self._locked_message(stored, locked_until))
            elif not enabled:
                self._event(db, stored, "sign_in_disabled")
                refusal = _Disabled(f"The account {stored} is disabled.", hashed)
            elif failed + 1 >= self.max_failures:
                lock = _iso(now + self.lockout)
                db.execute("UPDATE accounts SET failed_attempts = 0, locked_until = ? WHERE name = ?", [lock, stored])
                taken = (stored, hashed, lock)
            else:
                db.execute("UPDATE accounts SET failed_attempts = ?, locked_until = NULL WHERE name = ?",
                           [failed + 1, stored])
                taken = (stored, hashed, None)
        if refusal is not None:
            raise refusal
        return taken

    def _locked_message(self, name: str, locked_until: str) -> str:
        left = datetime.fromisoformat(locked_until) - self._clock()
        minutes = max(1, int(-(-left.total_seconds() // 60)))
        return (f"The account {name} is locked after {self.max_failures} wrong passwords; "
                f"try again in {minutes} minute{'s' if minutes != 1 else ''}.")

    def _failed(self, name: str, lock: str | None) -> None:
        """A wrong password: the attempt was counted (and the lock taken) before the check."""
        with self._db() as db, write_transaction(db):
            self._event(db, name, "locked_out" if lock else "sign_in_failed")
        if lock:
            raise AccountLocked(self._locked_message(name, lock))
        raise SignInRefused(WRONG)

    def _succeeded(self, name: str, password: str, hashed: str, lock: str | None) -> Account:
        """The right password: the count (and this attempt's own lock) is cleared, unless other
        attempts locked the account meanwhile."""
        rehashed = self.hasher.hash(password) if self.hasher.check_needs_rehash(hashed) else None
        with self._db() as db, write_transaction(db):
            locked_until = db.execute("SELECT locked_until FROM accounts WHERE name = ?", [name]).fetchone()[0]
            if locked_until and locked_until != lock and datetime.fromisoformat(locked_until) > self._clock():
                locked_meanwhile = locked_until
            else:
                locked_meanwhile = None
                db.execute("UPDATE accounts SET failed_attempts = 0, locked_until = NULL, last_sign_in_at = ? "
                           "WHERE name = ?", [_iso(self._clock()), name])
                if rehashed:
                    db.execute("UPDATE accounts SET password_hash = ? WHERE name = ?", [rehashed, name])
                self._event(db, name, "signed_in" + (" (rehashed)" if rehashed else ""))
        if locked_meanwhile:
            raise AccountLocked(self._locked_message(name, locked_meanwhile))
        return self.get(name)

    def _record(self, name: str, event: str) -> None:
        with self._db() as db, write_transaction(db):
            self._event(db, name, event)

    def _dummy_verify(self, password: str) -> None:
        from argon2.exceptions import VerificationError

        try:
            self.hasher.verify(self._dummy_hash(), password)
        except VerificationError:
            pass

    def _dummy_hash(self) -> str:
        if self._dummy is None:
            self._dummy = self.hasher.hash("not a password of anyone's")
        return self._dummy

    def events(self, limit: int = 100) -> list[tuple[str, str, str]]:
        """The latest account events, newest first: (time, name, event)."""
        if not self.path.exists():
            return []
        with self._db() as db:
            return [tuple(r) for r in db.execute(
                "SELECT at, name, event FROM account_events ORDER BY id DESC LIMIT ?", [limit]).fetchall()]
