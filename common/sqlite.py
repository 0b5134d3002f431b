"""The one way every store opens, checks, writes and migrates its SQLite file.

Used by the EHR (``ehr_db``), the UMLS and knowledge stores (``mcp_servers``) and the session
store (``appliance.accounts.sessions``). A store's own rules live in its module docstring; these hold
for all of them.

Invariants:
- ``connect`` gives a sqlite-utils ``Database`` on its own connection with a busy timeout and
  foreign keys on. Writable connections put the file in WAL mode (persistent), so readers never
  wait for the writer and never see half a commit; read connections are ``query_only``.
  Connections are cheap and short-lived: one per call or per thread, never shared.
- A database file ``connect`` creates is 0600 (``common.locations``: files holding patient
  data are private), and so are the -wal and -shm files SQLite creates beside it.
- The first ``connect`` to a file in a process runs ``PRAGMA quick_check`` (it reads the whole
  file, so only once per file per process); a damaged file raises ``DatabaseCorrupt``, never a
  bare sqlite3 error. Read connections to a store rebuilt from files (``durable=False``: UMLS,
  knowledge) skip it: their builders (``appliance init``, the importers) open them writable
  and so check them, so a server's first read does not scan the whole file (most of a second
  for a 50,000-trial knowledge file); damage found later is SQLite's own error on the
  statement that reads it.
- Writes that belong together run in ``write_transaction`` (``BEGIN IMMEDIATE``): the write lock
  is taken up front, so a writer waits on the busy timeout instead of failing when another
  connection committed between its first read and its first write. Inside it, sqlite-utils'
  table helpers and scripts (``insert``, ``create``, ``enable_fts``) join the transaction as
  savepoints (sqlite-utils 4), so everything commits together or not at all.
- Schema changes are named, append-only migration functions, applied in order by sqlite-utils'
  ``Migrations`` and recorded in its ``_sqlite_migrations`` table under the store's name (the
  migration set). ``migrate`` applies all pending ones in one write transaction, so two
  processes migrating at once never both apply one, and a failed migration leaves the schema as
  it was. Databases written before this module recorded names in a ``_migrations`` table
  (``name``, ``applied_at``); ``migrate`` moves those records over (same names, same times) in
  that transaction and drops the old table.
- Builders of the stores rebuilt from files (``appliance init``, an importer, a server's first
  start) hold ``build_lock``, an exclusive file lock beside the database, so two never build at
  once.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlite_utils import Database, Migrations

from common.errors import ApplianceError
from common.locations import PRIVATE_FILE_MODE

BUSY_TIMEOUT_SECONDS = 15.0
LEGACY_MIGRATIONS_TABLE = "_migrations"
MIGRATIONS_TABLE = Migrations.migrations_table  # "_sqlite_migrations"

Migration = Callable[[Database], None]

_checked: set[str] = set()
_checked_lock = threading.Lock()


class DatabaseCorrupt(ApplianceError):
    """A database file failed SQLite's integrity check or is not a database."""


def connect(path: Path | str, *, read_only: bool = False, durable: bool = True) -> Database:
    """Open the database at ``path`` (created if missing); see the module invariants.

    ``durable=False`` is for stores rebuilt from files (UMLS, knowledge): ``synchronous =
    NORMAL`` saves an fsync per commit, and a power cut may lose the last commits but never
    leaves the file inconsistent; their read connections are not integrity-checked.
    """
    _create_private(path)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SECONDS, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        if durable or not read_only:
            _check_once(conn, path)
        db = Database(conn, execute_plugins=False)
        db.execute("PRAGMA foreign_keys = ON")
        if read_only:
            db.execute("PRAGMA query_only = ON")
        elif str(path) != ":memory:":
            db.enable_wal()
            if not durable:
                db.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return db


def _create_private(path: Path | str) -> None:
    """Create a missing database file empty and 0600 (SQLite reads an empty file as an empty
    database, and gives the -wal and -shm it creates the same mode)."""
    if str(path) == ":memory:":
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
    except (FileExistsError, FileNotFoundError):  # present already; or no folder: SQLite says so
        pass


def _check_once(conn: sqlite3.Connection, path: Path | str) -> None:
    if str(path) == ":memory:":
        return
    key = str(Path(path).resolve())
    with _checked_lock:
        if key in _checked:
            return
        try:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorname", "") not in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
                raise  # locked, unreadable...: not a verdict on the file's contents
            problems = [str(exc)]
        if problems != ["ok"]:
            raise DatabaseCorrupt(
                f"{Path(path).name} is damaged ({len(problems)} problem(s) found by SQLite's integrity "
                "check); restore it from a backup, or move it aside and run `appliance init`"
            )
        _checked.add(key)


@contextmanager
def opened(path: Path | str, *, read_only: bool = False, durable: bool = True) -> Iterator[Database]:
    """``connect`` as a context manager that always closes the connection."""
    db = connect(path, read_only=read_only, durable=durable)
    try:
        yield db
    finally:
        db.close()


@contextmanager
def write_transaction(db: Database) -> Iterator[Database]:
    """One atomic write under the write lock: everything inside commits together or not at all."""
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
    """The current UTC time, ISO 8601 to the second (how the stores record times)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


# -- migrations ------------------------------------------------------------------------------
def _migration_set(store: str, migrations: Sequence[Migration]) -> Migrations:
    steps = Migrations(store)
    for fn in migrations:
        steps()(fn)
    return steps


def migration_collector(migrations: list[Migration]) -> Callable[[Migration], Migration]:
    """A ``@migration`` decorator for a store's module: it appends each function it decorates to
    ``migrations``, in the order the module defines them (the order ``migrate`` applies them)."""
    def migration(fn: Migration) -> Migration:
        migrations.append(fn)
        return fn

    return migration


def migrate(db: Database, store: str, migrations: Sequence[Migration]) -> list[str]:
    """Apply the pending ``migrations`` of ``store`` in order; return the names applied."""
    steps = _migration_set(store, migrations)
    if LEGACY_MIGRATIONS_TABLE not in db.table_names() and not steps.pending(db):
        return []  # up to date: no write lock taken
    with write_transaction(db):
        steps.ensure_migrations_table(db)
        if LEGACY_MIGRATIONS_TABLE in db.table_names():
            _carry_over_legacy_records(db, store)
        applied = [m.name for m in steps.pending(db)]
        steps.apply(db)
    return applied


def _carry_over_legacy_records(db: Database, store: str) -> None:
    """Move ``_migrations`` rows (the format before this module) into the store's migration set."""
    db.execute(
        f"INSERT OR IGNORE INTO {MIGRATIONS_TABLE} (migration_set, name, applied_at) "
        f"SELECT ?, name, coalesce(applied_at, '') FROM {LEGACY_MIGRATIONS_TABLE} ORDER BY rowid",
        [store],
    )
    db.execute(f"DROP TABLE {LEGACY_MIGRATIONS_TABLE}")


def applied_migrations(db: Database, store: str) -> list[str]:
    """Names of the migrations of ``store`` recorded in the database, in the order applied."""
    return [m.name for m in Migrations(store).applied(db)]


# -- builders --------------------------------------------------------------------------------
@contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """Serialise concurrent builders of the database at ``path`` (a lock file beside it)."""
    lock = path.with_name(path.name + ".lock")
    with open(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def building(path: Path | str, store: str, migrations: Sequence[Migration],
             say: Callable[[str], None] = lambda _m: None) -> Iterator[Database]:
    """Open a rebuildable store for a builder: under the build lock, in WAL mode, migrated."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(path), opened(path, durable=False) as db:
        for name in migrate(db, store, migrations):
            say(f"schema migration {name} applied")
        yield db


def get_meta(db: Database, key: str) -> str | None:
    """A value of the store's ``meta`` key-value table (None when absent)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else None


def set_meta(db: Database, key: str, value: str) -> None:
    db.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [key, value],
    )
