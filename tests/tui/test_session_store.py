"""The session store on real SQLite: migrations, exchanges, history of completed turns only."""

from __future__ import annotations

import sqlite3

import pytest
from sqlite_utils import Database

from appliance.accounts.sessions import (
    MIGRATIONS,
    SessionStore,
    SessionStoreError,
    make_title,
    migrate,
)
from common.sqlite import MIGRATIONS_TABLE, applied_migrations

pytestmark = pytest.mark.timeout(30)


def test_migrating_a_blank_database_creates_the_schema_once(tmp_path):
    db = Database(sqlite3.connect(tmp_path / "s.sqlite"))
    assert migrate(db) == [fn.__name__ for fn in MIGRATIONS]
    assert migrate(db) == []  # idempotent
    assert {"sessions", "messages", MIGRATIONS_TABLE} <= set(db.table_names())
    assert list(db["messages"].columns_dict) == [
        "id", "session_id", "seq", "role", "kind", "text", "status", "created_at", "patient_id", "trace"]
    assert [fk.other_table for fk in db["messages"].foreign_keys] == ["sessions"]
    assert any(ix.columns == ["session_id", "seq"] and ix.unique for ix in db["messages"].indexes)


def test_a_store_made_before_common_sqlite_opens_with_its_sessions(tmp_path):
    # The session store's legacy record format: _migrations created by sqlite-utils (name pk, applied_at).
    old = Database(sqlite3.connect(tmp_path / "s.sqlite"))
    old["_migrations"].create({"name": str, "applied_at": str}, pk="name")
    MIGRATIONS[0](old)
    old["_migrations"].insert({"name": MIGRATIONS[0].__name__, "applied_at": "2026-01-02T03:04:05.000001+00:00"})
    old["sessions"].insert({"id": "s1", "title": "Old", "created_at": "2026", "updated_at": "2026"})
    old.close()
    store = SessionStore(tmp_path / "s.sqlite")
    assert store.get_session("s1").title == "Old"
    db = Database(sqlite3.connect(tmp_path / "s.sqlite"))
    assert applied_migrations(db, "sessions") == [fn.__name__ for fn in MIGRATIONS]
    assert "_migrations" not in db.table_names()


def test_exchanges_history_and_resume_order(tmp_path):
    store = SessionStore(tmp_path / "s.sqlite")
    first = store.create_session(model="gemma3-270m")
    store.add_exchange(first.id, "What is hypertension?", "Raised blood pressure.", trace=[{"node": "SYNTHESIZE"}])
    store.add_exchange(first.id, "And treatment?", "Partial", status="cancelled")
    store.add_exchange(first.id, "Find James Wilson", "Which one?", kind="clarification", patient_id="pat-011")
    second = store.create_session(model="gemma3-270m")
    reopened = SessionStore(tmp_path / "s.sqlite")  # a restart
    assert [s.id for s in reopened.list_sessions()] == [second.id, first.id]
    session = reopened.get_session(first.id)
    assert session.title == "What is hypertension?" and session.message_count == 6
    assert session.patient_id == "pat-011"
    assert reopened.history(first.id) == [
        ("user", "What is hypertension?"), ("assistant", "Raised blood pressure."),
        ("user", "Find James Wilson"), ("assistant", "Which one?"),
    ]
    messages = reopened.messages(first.id)
    assert [m.seq for m in messages] == [1, 2, 3, 4, 5, 6]
    assert messages[1].trace == [{"node": "SYNTHESIZE"}] and messages[3].status == "cancelled"


def test_errors_are_session_store_errors(tmp_path):
    store = SessionStore(tmp_path / "s.sqlite")
    with pytest.raises(SessionStoreError, match="no longer exists"):
        store.messages("missing")
    with pytest.raises(SessionStoreError):
        store.add_exchange("missing", "q", "a")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SessionStoreError):
        SessionStore(blocker / "s.sqlite")


def test_titles_are_short_single_lines():
    assert make_title("  What\nis   this? ") == "What is this?"
    assert len(make_title("x" * 200)) == 60
