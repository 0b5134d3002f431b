"""The clinician account store: Argon2 hashes, rehash on sign-in, lock-out timed by an injected
clock, disabled accounts, the file's mode, and that no password is ever stored or recorded."""

from __future__ import annotations

import sqlite3
import stat
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from argon2 import PasswordHasher

from appliance.accounts import (
    WRONG,
    AccountError,
    AccountLocked,
    AccountStore,
    SignInPolicy,
    SignInRefused,
    policy_path,
    write_policy,
)
from appliance.config import Settings
from common.sqlite import applied_migrations, opened

pytestmark = pytest.mark.timeout(60)
CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)  # fast tests; the store defaults to argon2's
PASSWORD = "correct horse battery"


class Clock:
    def __init__(self):
        self.now = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    return AccountStore(tmp_path / "home" / "accounts.sqlite", max_failures=3, lockout_minutes=15, clock=clock,
                        hasher=CHEAP)


def raw(store, sql):
    conn = sqlite3.connect(store.path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_a_blank_store_migrates_and_an_absent_file_is_not_created(store):
    assert store.exists() is False and not store.path.exists()  # asking creates nothing
    assert store.list() == [] and store.get("anyone") is None
    store.add("aokafor", PASSWORD, display_name="Dr. Ada Okafor", role="physician")
    assert store.exists() is True
    with opened(store.path) as db:
        assert applied_migrations(db, "accounts") == ["m001_accounts", "m002_record_heads"]
        assert {"accounts", "account_events", "record_heads"} <= set(db.table_names())


def test_the_file_is_owner_only(store):
    store.add("aokafor", PASSWORD)
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) & 0o077 == 0


def test_passwords_are_argon2id_hashes_and_never_stored_or_recorded(store):
    store.add("aokafor", PASSWORD)
    with pytest.raises(SignInRefused):
        store.verify("aokafor", "a wrong password")
    with pytest.raises(SignInRefused):
        store.verify(PASSWORD, PASSWORD)  # a password typed into the name field
    [(hashed,)] = raw(store, "SELECT password_hash FROM accounts")
    assert hashed.startswith("$argon2id$") and PASSWORD not in hashed
    dump = "\n".join(sqlite3.connect(store.path).iterdump())
    assert PASSWORD not in dump and "a wrong password" not in dump
    assert [e[2] for e in store.events()] == ["sign_in_unknown", "sign_in_failed", "added"]


def test_sign_in_is_case_insensitive_and_returns_the_stored_name(store, clock):
    store.add("AOkafor", PASSWORD, display_name="  Dr.  Ada Okafor ")
    account = store.verify("aokafor", PASSWORD)
    assert account.name == "AOkafor" and account.label == "Dr. Ada Okafor (AOkafor)"
    assert account.last_sign_in_at == clock.now.isoformat()
    with pytest.raises(AccountError, match="already exists"):
        store.add("aokafor", PASSWORD)


@pytest.mark.parametrize("name,password,words", [
    ("", PASSWORD, "account name"),
    ("bad name", PASSWORD, "account name"),
    ("-dash", PASSWORD, "account name"),
    ("x" * 65, PASSWORD, "account name"),
    ("ok", "short", "at least 8"),
    ("ok", "two\nlines!", "one line"),
])
def test_bad_names_and_passwords_are_refused(store, name, password, words):
    with pytest.raises(AccountError, match=words):
        store.add(name, password)
    assert not store.exists()


def test_an_old_hash_is_replaced_at_the_next_sign_in(tmp_path, clock):
    path = tmp_path / "accounts.sqlite"
    AccountStore(path, clock=clock, hasher=CHEAP).add("aokafor", PASSWORD)
    [(before,)] = raw(AccountStore(path), "SELECT password_hash FROM accounts")
    current = AccountStore(path, clock=clock)  # argon2-cffi's defaults
    assert current.hasher.check_needs_rehash(before)
    current.verify("aokafor", PASSWORD)
    [(after,)] = raw(current, "SELECT password_hash FROM accounts")
    assert after != before and not current.hasher.check_needs_rehash(after)
    assert current.verify("aokafor", PASSWORD).name == "aokafor"  # the new hash verifies
    assert current.events()[1][2] == "signed_in (rehashed)"


def test_lock_out_after_repeated_failures_then_it_expires(store, clock):
    store.add("aokafor", PASSWORD)
    for _ in range(2):
        with pytest.raises(SignInRefused) as refused:
            store.verify("aokafor", "wrong password")
        assert not isinstance(refused.value, AccountLocked)
    with pytest.raises(AccountLocked, match="locked after 3 wrong passwords; try again in 15 minutes"):
        store.verify("aokafor", "wrong password")
    assert store.get("aokafor").locked_until == (clock.now + timedelta(minutes=15)).isoformat()
    clock.advance(minutes=14, seconds=1)
    with pytest.raises(AccountLocked, match="in 1 minute"):
        store.verify("aokafor", PASSWORD)  # even the right password waits
    clock.advance(seconds=59)
    assert store.verify("aokafor", PASSWORD).name == "aokafor"
    account = store.get("aokafor")
    assert account.failed_attempts == 0 and account.locked_until is None


def test_a_success_resets_the_count_of_failures(store):
    store.add("aokafor", PASSWORD)
    for _ in range(2):
        with pytest.raises(SignInRefused):
            store.verify("aokafor", "wrong password")
    store.verify("aokafor", PASSWORD)
    for _ in range(2):
        with pytest.raises(SignInRefused) as refused:
            store.verify("aokafor", "wrong password")
        assert not isinstance(refused.value, AccountLocked)


def test_a_new_password_lifts_the_lock_out(store):
    store.add("aokafor", PASSWORD)
    for _ in range(3):
        with pytest.raises(SignInRefused):
            store.verify("aokafor", "wrong password")
    store.set_password("aokafor", "another good one")
    assert store.verify("aokafor", "another good one").locked_until is None
    with pytest.raises(SignInRefused):
        store.verify("aokafor", PASSWORD)


def test_disabled_accounts_cannot_sign_in_until_enabled(store):
    store.add("aokafor", PASSWORD)
    assert store.set_enabled("aokafor", False).enabled is False
    with pytest.raises(SignInRefused, match="disabled"):
        store.verify("aokafor", PASSWORD)
    assert store.exists()  # a disabled account still means sign-in is required
    store.set_enabled("AOKAFOR", True)
    assert store.verify("aokafor", PASSWORD).enabled
    with pytest.raises(AccountError, match="no account named 'nobody'"):
        store.set_enabled("nobody", False)


def test_a_disabled_account_with_a_wrong_password_reads_as_a_wrong_password(store):
    """Names cannot be probed: "disabled" is said only to whoever typed the right password."""
    store.add("aokafor", PASSWORD)
    store.set_enabled("aokafor", False)
    with pytest.raises(SignInRefused) as wrong:
        store.verify("aokafor", "not the password")
    with pytest.raises(SignInRefused) as unknown:
        store.verify("nobody", "not the password")
    assert str(wrong.value) == str(unknown.value) == WRONG and "aokafor" not in str(wrong.value)
    with pytest.raises(SignInRefused, match="The account aokafor is disabled"):
        store.verify("aokafor", PASSWORD)


def test_unknown_names_and_an_empty_store_are_refused_alike(store):
    with pytest.raises(SignInRefused, match="Unknown clinician or wrong password"):
        store.verify("aokafor", PASSWORD)
    store.add("aokafor", PASSWORD)
    with pytest.raises(SignInRefused, match="Unknown clinician or wrong password"):
        store.verify("someone", PASSWORD)


def test_the_policy_comes_from_the_operators_file_in_the_data_home(tmp_path):
    path = tmp_path / "a.sqlite"
    assert AccountStore.from_settings(Settings(), path).max_failures == 5  # no file: the defaults
    write_policy(SignInPolicy(max_failures=2, lockout_minutes=1), policy_path(path))
    store = AccountStore.from_settings(Settings(), path)
    assert store.max_failures == 2 and store.lockout == timedelta(minutes=1)
    assert stat.S_IMODE(policy_path(path).stat().st_mode) == 0o600
    policy_path(path).write_text("{not json")
    with pytest.raises(AccountError, match="cannot be read as the sign-in policy"):
        AccountStore.from_settings(Settings(), path)  # never a silent default
    for bad in ('{"max_failures": 0}', '{"max_failures": true}', '{"lockout_minutes": "1"}', '{"other": 1}'):
        policy_path(path).write_text(bad)
        with pytest.raises(AccountError, match="sign-in policy"):
            AccountStore.from_settings(Settings(), path)


def test_the_callers_environment_does_not_change_the_policy(appliance_home, monkeypatch, clock):
    """The issue's case: with APPLIANCE_SIGN_IN_MAX_FAILURES=1000 in the caller's environment,
    8 wrong tries did not lock."""
    monkeypatch.setenv("APPLIANCE_SIGN_IN_MAX_FAILURES", "1000")
    monkeypatch.setenv("APPLIANCE_SIGN_IN_LOCKOUT_MINUTES", "0.01")
    store = AccountStore.from_settings(Settings())
    assert store.max_failures == 5 and store.lockout == timedelta(minutes=15)
    store._hasher, store._clock = CHEAP, clock
    store.add("racer", PASSWORD)
    for _ in range(4):
        with pytest.raises(SignInRefused) as refused:
            store.verify("racer", "wrong password")
        assert not isinstance(refused.value, AccountLocked)
    with pytest.raises(AccountLocked, match="locked after 5 wrong passwords"):
        store.verify("racer", "wrong password")


class SlowCountingHasher:
    """Argon2 as slow as a real check (so concurrent attempts overlap), counting the checks."""

    def __init__(self, seconds: float = 0.3):
        self.seconds = seconds
        self.checks = 0
        self._lock = threading.Lock()

    def hash(self, password):
        return CHEAP.hash(password)

    def check_needs_rehash(self, hashed):
        return False

    def verify(self, hashed, password):
        with self._lock:
            self.checks += 1
        time.sleep(self.seconds)
        return CHEAP.verify(hashed, password)


@pytest.mark.parametrize("attempts, max_failures", [(20, 5), (14, 3)])
def test_concurrent_wrong_passwords_check_at_most_the_allowed_count_then_lock(tmp_path, attempts, max_failures):
    """The issue's case: 14 concurrent wrong-password runs were all checked (12 failed + 2 locked
    out), not 5: the count and the lock were read before the check and written after it."""
    hasher = SlowCountingHasher()
    store = AccountStore(tmp_path / "accounts.sqlite", max_failures=max_failures, hasher=hasher)
    store.add("racer", PASSWORD)
    start = threading.Barrier(attempts)
    outcomes: list[str] = []

    def attempt():
        start.wait()
        try:
            store.verify("racer", "wrong password")
            outcomes.append("signed in")
        except AccountLocked:
            outcomes.append("locked")
        except SignInRefused:
            outcomes.append("wrong")

    threads = [threading.Thread(target=attempt) for _ in range(attempts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert hasher.checks == max_failures  # the rest were refused before their password was looked at
    assert outcomes.count("wrong") == max_failures - 1 and outcomes.count("locked") == attempts - max_failures + 1
    assert store.get("racer").locked_until is not None
    events = [e for _, _, e in store.events()]
    assert events.count("locked_out") == 1 and events.count("sign_in_failed") == max_failures - 1
    with pytest.raises(AccountLocked):
        store.verify("racer", PASSWORD)  # even the right one waits
    assert hasher.checks == max_failures


def test_the_right_password_among_concurrent_wrong_ones_is_refused_once_they_locked_the_account(tmp_path):
    hasher = SlowCountingHasher(seconds=0.5)
    store = AccountStore(tmp_path / "accounts.sqlite", max_failures=2, hasher=hasher)
    store.add("aokafor", PASSWORD)
    results: dict[str, object] = {}

    def attempt(key, password, delay):
        time.sleep(delay)
        try:
            results[key] = store.verify("aokafor", password).name
        except SignInRefused as exc:
            results[key] = type(exc).__name__

    threads = [threading.Thread(target=attempt, args=("right", PASSWORD, 0)),
               threading.Thread(target=attempt, args=("wrong", "wrong password", 0.1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    # The right one was counted first (1 of 2), the wrong one took the last attempt and the lock:
    # the right one, finishing after the lock was taken by another, is refused.
    assert results == {"right": "AccountLocked", "wrong": "AccountLocked"}
