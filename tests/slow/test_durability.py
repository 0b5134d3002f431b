"""Durability of EHR writes under SIGKILL: writer processes killed at random moments
during over 1,000 writes, then the invariants checked from the database file alone
(``ehr_db.durability``; ``appliance selftest`` runs the same function)."""

from __future__ import annotations

import random

import pytest

from ehr_db.durability import crash_test

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(120)]  # fault drills: the heavy tier


def test_writers_killed_at_random_moments_lose_nothing_and_leave_no_half_write(tmp_path):
    seed = random.randrange(2**32)
    report = crash_test(tmp_path, min_writes=1000, min_rounds=10, seed=seed)
    print(f"\ncrash test (seed {seed}): {report.summary()}")
    assert report.integrity == "ok"
    assert report.attempted >= 1000 and report.rounds >= 10, report.summary()
    assert report.lost == 0  # every write logged as committed is in the file
    assert report.unaudited == 0 and report.orphan_audits == 0  # each write with its one audit row, and back
    assert report.duplicated == 0  # a resent key never wrote twice
    assert report.rows == report.audit_rows >= report.committed_logged
    assert report.ok


def test_it_refuses_a_database_it_did_not_create(tmp_path):
    (tmp_path / "ehr-crash-test.sqlite").write_bytes(b"")
    with pytest.raises(FileExistsError):
        crash_test(tmp_path, min_writes=1, min_rounds=1)
