"""Connections and transactions for the EHR database.

Invariants:
- Every connection has a busy timeout and foreign keys on; the database runs in WAL mode
  (set by ``migrate``), so readers never wait for the writer and never see a half-written
  record.
- Writes run inside ``write_transaction`` (``BEGIN IMMEDIATE``): the write lock is taken up
  front, so a writer waits on the busy timeout instead of failing when another connection
  committed between its first read and its first write.
- Connections are cheap and short-lived: one per call (or per thread), never shared.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from sqlite_utils import Database

BUSY_TIMEOUT_SECONDS = 15.0


def connect(path: Path | str) -> Database:
    """Open the database at ``path`` (created if missing) with the EHR's pragmas."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SECONDS, check_same_thread=False)
    db = Database(conn, execute_plugins=False)
    db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    db.execute("PRAGMA foreign_keys = ON")
    return db


@contextmanager
def opened(path: Path | str) -> Iterator[Database]:
    """``connect`` as a context manager that always closes the connection."""
    db = connect(path)
    try:
        yield db
    finally:
        db.close()


@contextmanager
def write_transaction(db: Database) -> Iterator[Database]:
    """One atomic write: everything inside commits together or not at all."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.rollback()
        raise
    try:
        db.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise


@contextmanager
def read_snapshot(db: Database) -> Iterator[Database]:
    """Several reads that see one consistent state of the database."""
    db.execute("BEGIN")
    try:
        yield db
    finally:
        db.rollback()


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second (how every timestamp is stored)."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()
