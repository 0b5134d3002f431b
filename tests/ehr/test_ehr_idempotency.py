"""Idempotency keys on EHR writes: the same key is performed once, with one audit row."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest
from fastmcp import Client

from ehr_db.errors import InvalidField
from ehr_db.repository import EhrRepository
from mcp_servers.ehr import server as ehr

RX = dict(patient_id="abc-123", medication_name="sitagliptin", dosage="100 mg", frequency="once daily", notes=None)


def counts(path) -> tuple[int, int, int]:
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("SELECT count(*) FROM medication_requests WHERE medication_name = 'sitagliptin'").fetchone()[0],
                conn.execute("SELECT count(*) FROM audit_log WHERE tool = 'prescribe_medication'").fetchone()[0],
                conn.execute("SELECT count(*) FROM write_keys").fetchone()[0])
    finally:
        conn.close()


def test_the_keys_table_is_unique_and_append_only(ehr_path):
    conn = sqlite3.connect(ehr_path)
    try:
        index = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'idx_write_keys_key'").fetchone()[0]
        assert "UNIQUE" in index.upper()
        row = ("k" * 10, "prescribe_medication", "{}", "r1", "2026-01-01T00:00:00+00:00")
        conn.execute("INSERT INTO write_keys VALUES (?, ?, ?, ?, ?)", row)
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("INSERT INTO write_keys VALUES (?, ?, ?, ?, ?)", row)
        for statement in ("UPDATE write_keys SET record_id = 'x'", "DELETE FROM write_keys"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)
    finally:
        conn.close()


def test_a_repeated_key_returns_the_first_write_and_writes_nothing(repo: EhrRepository, ehr_path):
    first = repo.prescribe_medication(**RX, author="dr a", idempotency_key="key-0001")
    again = repo.prescribe_medication(**RX, author="dr a", idempotency_key="key-0001")
    assert again == first
    assert counts(ehr_path) == (1, 1, 1)
    other = repo.prescribe_medication(**RX, author="dr a", idempotency_key="key-0002")  # a new intent: a new row
    assert other != first and counts(ehr_path) == (2, 2, 2)
    plain = [repo.prescribe_medication(**RX, author="dr a") for _ in range(2)]  # no key: every call writes
    assert plain[0] != plain[1] and counts(ehr_path) == (4, 4, 2)


def test_a_key_reused_for_another_write_is_refused(repo, ehr_path):
    repo.prescribe_medication(**RX, author="dr a", idempotency_key="key-0003")
    with pytest.raises(InvalidField, match="idempotency_key"):
        repo.prescribe_medication(**{**RX, "dosage": "50 mg"}, author="dr a", idempotency_key="key-0003")
    with pytest.raises(InvalidField, match="idempotency_key"):
        repo.save_clinical_note("abc-123", "progress", "Stable.", author="dr a", idempotency_key="key-0003")
    assert counts(ehr_path) == (1, 1, 1)


@pytest.mark.parametrize("key", ["short", "has space in it", "x" * 101, "semi;colon-123"])
def test_malformed_keys_are_refused(repo, key):
    with pytest.raises(InvalidField, match="idempotency_key"):
        repo.add_allergy("abc-123", "latex", "rash", None, author="dr a", idempotency_key=key)


def test_concurrent_writers_with_one_key_write_once(repo, ehr_path):
    ids: list[str] = []
    barrier = threading.Barrier(4)

    def write():
        barrier.wait()
        ids.append(repo.prescribe_medication(**RX, author="dr a", idempotency_key="key-race-1"))

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and counts(ehr_path) == (1, 1, 1)


def test_the_server_takes_the_key_and_performs_a_repeat_once(ehr_path):
    ehr.configure(ehr_path)
    try:
        async def go():
            async with Client(ehr.mcp) as client:
                return [(await client.call_tool("prescribe_medication", {**RX, "idempotency_key": "srv-key-1"})).data
                        for _ in range(2)]

        first, second = asyncio.run(go())
        assert first == second and counts(ehr_path) == (1, 1, 1)
    finally:
        ehr.configure(None)
