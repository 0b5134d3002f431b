"""common.sqlite on real files: connection settings, the integrity check at first open, write
transactions, migrations (and records carried over from the legacy ``_migrations`` table)."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from sqlite_utils import Database

from common import sqlite
from common.errors import ApplianceError
from common.sqlite import MIGRATIONS_TABLE, DatabaseCorrupt

pytestmark = pytest.mark.timeout(60)


def m001_items(db: Database) -> None:
    db["items"].create({"id": int, "name": str}, pk="id")


def m002_items_fts(db: Database) -> None:
    db["items"].enable_fts(["name"], create_triggers=True)  # a script: must still join the transaction


def m003_fails(db: Database) -> None:
    db["other"].create({"id": int}, pk="id")
    raise RuntimeError("broken migration")


STEPS = [m001_items, m002_items_fts]


def test_connections_are_configured(tmp_path):
    path = tmp_path / "a.sqlite"
    db = sqlite.connect(path)
    assert db.journal_mode == "wal"
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == int(sqlite.BUSY_TIMEOUT_SECONDS * 1000)
    db.close()
    reader = sqlite.connect(path, read_only=True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.execute("CREATE TABLE t (x)")
    reader.close()


def test_a_file_that_is_not_a_database_is_refused_clearly(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"this is not a database" * 200)
    with pytest.raises(DatabaseCorrupt, match="notes.sqlite is damaged") as caught:
        sqlite.connect(path)
    assert isinstance(caught.value, ApplianceError)


def test_a_damaged_database_is_refused_clearly(tmp_path):
    path = tmp_path / "damaged.sqlite"
    db = Database(sqlite3.connect(path))
    db["rows"].insert_all(({"id": i, "text": f"row {i:05d} " * 20} for i in range(2000)), pk="id")
    db["rows"].create_index(["text"])
    db.close()
    data = bytearray(path.read_bytes())
    page = 4096
    data[5 * page + 16: 5 * page + 2000] = b"\xff" * (2000 - 16)  # a page in the middle of the table
    path.write_bytes(bytes(data))
    with pytest.raises(DatabaseCorrupt):
        sqlite.connect(path)


@pytest.fixture
def traced(monkeypatch) -> list[str]:
    """Every SQL statement the helper's connections run, in order."""
    statements: list[str] = []
    real_connect = sqlite3.connect

    def tracing_connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite.sqlite3, "connect", tracing_connect)
    return statements


def test_the_integrity_check_runs_once_per_file(tmp_path, traced):
    path = tmp_path / "once.sqlite"
    sqlite.connect(path).close()
    assert "PRAGMA quick_check" in traced
    traced.clear()
    for read_only in (False, True, False):
        sqlite.connect(path, read_only=read_only).close()
    assert traced and not any("quick_check" in sql for sql in traced)


def test_readers_of_a_rebuildable_store_skip_the_integrity_check(tmp_path, traced):
    path = tmp_path / "rebuilt.sqlite"
    sqlite.connect(path, read_only=True, durable=False).close()
    assert traced and not any("quick_check" in sql for sql in traced)
    sqlite.connect(path, durable=False).close()  # a builder's writable open checks it
    assert "PRAGMA quick_check" in traced

def test_write_transaction_is_all_or_nothing(tmp_path):
    db = sqlite.connect(tmp_path / "w.sqlite")
    sqlite.migrate(db, "test", STEPS)
    with pytest.raises(RuntimeError):
        with sqlite.write_transaction(db):
            db["items"].insert({"id": 1, "name": "one"})  # sqlite-utils helpers join the transaction
            db.execute("INSERT INTO items (id, name) VALUES (2, 'two')")
            raise RuntimeError("stop")
    assert db["items"].count == 0
    with sqlite.write_transaction(db):
        db["items"].insert({"id": 1, "name": "one"})
    assert db["items"].count == 1


def test_migrations_apply_in_order_once_and_are_recorded(tmp_path):
    db = sqlite.connect(tmp_path / "m.sqlite")
    assert sqlite.migrate(db, "test", STEPS) == ["m001_items", "m002_items_fts"]
    assert sqlite.migrate(db, "test", STEPS) == []
    assert sqlite.applied_migrations(db, "test") == ["m001_items", "m002_items_fts"]
    assert {r["migration_set"] for r in db[MIGRATIONS_TABLE].rows} == {"test"}
    assert "items_fts" in db.table_names()


def test_a_failed_migration_leaves_the_schema_as_it_was(tmp_path):
    db = sqlite.connect(tmp_path / "f.sqlite")
    with pytest.raises(RuntimeError, match="broken"):
        sqlite.migrate(db, "test", [*STEPS, m003_fails])
    assert not {"items", "items_fts", "other"} & set(db.table_names())
    assert sqlite.applied_migrations(db, "test") == []


@pytest.mark.parametrize("legacy_table", [
    "CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)",  # ehr_db
    "CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)",  # UMLS and knowledge stores
    "CREATE TABLE [_migrations] (\n   [name] TEXT PRIMARY KEY,\n   [applied_at] TEXT\n)",  # sessions
])
def test_legacy_records_are_carried_over(tmp_path, legacy_table):
    path = tmp_path / "legacy.sqlite"
    old = Database(sqlite3.connect(path))
    old.execute(legacy_table)
    m001_items(old)
    old.execute("INSERT INTO _migrations VALUES ('m001_items', '2026-01-02T03:04:05+00:00')")
    old["items"].insert({"id": 7, "name": "kept"})
    old.close()
    db = sqlite.connect(path)
    assert sqlite.migrate(db, "test", STEPS) == ["m002_items_fts"]
    assert list(db.query(f"SELECT name, applied_at FROM {MIGRATIONS_TABLE} ORDER BY id"))[0] == {
        "name": "m001_items", "applied_at": "2026-01-02T03:04:05+00:00"}
    assert "_migrations" not in db.table_names()
    assert db["items"].get(7)["name"] == "kept"
    assert sqlite.migrate(db, "test", STEPS) == []


def test_two_connections_migrating_at_once_apply_each_migration_once(tmp_path):
    path = tmp_path / "race.sqlite"
    sqlite.connect(path).close()
    start = threading.Barrier(2)
    results: list[list[str]] = []

    def run() -> None:
        db = sqlite.connect(path)
        start.wait()
        results.append(sqlite.migrate(db, "test", STEPS))
        db.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results, key=len) == [[], ["m001_items", "m002_items_fts"]]


def test_meta_values(tmp_path):
    db = sqlite.connect(tmp_path / "meta.sqlite")
    db["meta"].create({"key": str, "value": str}, pk="key")
    assert sqlite.get_meta(db, "content") is None
    sqlite.set_meta(db, "content", "starter")
    sqlite.set_meta(db, "content", "rrf")
    assert sqlite.get_meta(db, "content") == "rrf"
