"""What the UMLS and knowledge stores share: connections, the builders' lock, transactions,
named migrations and the ``meta`` key-value table.

Invariants:
- Every connection sets a busy timeout, so a reader never sees "database is locked" while a
  builder writes; read connections are ``query_only``. One connection per call or thread.
- Builders (``appliance init``, an importer, a server's first start) hold an exclusive file
  lock beside the database, so two of them never build at once.
- Migrations are named, append-only functions recorded in ``_migrations`` with the time they
  ran. (sqlite-utils' ``enable_fts`` runs a script, which commits on its own: a migration that
  uses it is not atomic, so migrations only create, and a crashed one is rebuilt from scratch
  by deleting the file, which these stores can always regenerate.)
"""

from __future__ import annotations

import fcntl
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Sequence

import sqlite_utils

BUSY_TIMEOUT_MS = 10_000
Migration = Callable[[sqlite_utils.Database], None]


def connect(path: Path, read_only: bool = False) -> sqlite_utils.Database:
    """A sqlite-utils Database on its own sqlite3 connection (one per call or thread)."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if read_only:
        conn.execute("PRAGMA query_only = ON")
    else:
        conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL; avoids an fsync per commit
    return sqlite_utils.Database(conn)


@contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """Serialise concurrent builders (``appliance init``, an import, a server's first start)."""
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def transaction(db: sqlite_utils.Database) -> Iterator[None]:
    """An explicit write transaction: all of a content build commits, or none of it.

    Inside it, write with ``db.execute`` / ``executemany`` only: sqlite-utils' table helpers
    (``insert_all``, ``upsert``) commit on their own.
    """
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.conn.execute("ROLLBACK")
        raise
    db.conn.execute("COMMIT")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def migrate(db: sqlite_utils.Database, migrations: Sequence[Migration]) -> list[str]:
    """Apply the pending migrations in order; return the names applied."""
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    done = {row[0] for row in db.execute("SELECT name FROM _migrations").fetchall()}
    applied = []
    for migration in migrations:
        if migration.__name__ not in done:
            with db.conn:
                migration(db)
                db.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", [migration.__name__, now()])
            applied.append(migration.__name__)
    return applied


@contextmanager
def building(path: Path, migrations: Sequence[Migration], say: Callable[[str], None]) -> Iterator[sqlite_utils.Database]:
    """Open the database at ``path`` for a builder: under the build lock, in WAL mode, migrated."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(path):
        db = connect(path)
        try:
            db.enable_wal()
            for name in migrate(db, migrations):
                say(f"schema migration {name} applied")
            yield db
        finally:
            db.close()


def get_meta(db: sqlite_utils.Database, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else None


def set_meta(db: sqlite_utils.Database, key: str, value: str) -> None:
    db.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [key, value],
    )
