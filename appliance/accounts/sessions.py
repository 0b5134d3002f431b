"""The clinic terminal's conversations, kept in SQLite so they can be resumed after a restart.

Invariants:
- Schema changes are named, append-only migration functions recorded under the migration set
  ``sessions`` (``common.sqlite``); ``migrate`` applies the missing ones in order, so it is
  idempotent. Connections come from ``common.sqlite`` (WAL, foreign keys, busy timeout).
- An exchange (the clinician's question and the reply, with its status) is written in one
  ``BEGIN IMMEDIATE`` transaction: a question is never stored without the outcome of its turn,
  and two terminals adding to one session never take the same ``seq``.
- ``history`` returns only completed exchanges: a cancelled or failed turn never becomes
  context for the model, so a cancel leaves the conversation consistent.
- ``record_heads`` holds a copy of the EHR's chain head, written by ``ehr_db.heads`` after each
  EHR commit, so a rolled-back record shows.
- Every failure surfaces as ``SessionStoreError`` with a message that carries no SQL and no
  patient data. No Textual import: this is core code used by the TUI and by tests.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlite_utils import Database

from appliance.errors import ApplianceError
from common import sqlite
from common.locations import sessions_db_path
from common.sqlite import Migration, write_transaction
from ehr_db import heads

TITLE_CHARS = 60
STATUSES = ("complete", "cancelled", "failed")
REPLY_KINDS = ("answer", "clarification", "notice")


class SessionStoreError(ApplianceError):
    """The session database could not be read or written."""


@dataclass(frozen=True)
class Session:
    id: str
    title: str
    created_at: str
    updated_at: str
    patient_id: str | None
    model: str | None
    message_count: int = 0
    # Every patient the session touched: open while a question was asked, or named in a tool call.
    patient_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    role: str  # "user" | "assistant"
    kind: str  # "question" | "answer" | "clarification" | "notice"
    text: str
    status: str
    patient_id: str | None
    trace: list[dict] | None


# -- migrations ---------------------------------------------------------------------------

STORE = "sessions"  # the migration set's name
MIGRATIONS: list[Migration] = []
migration = sqlite.migration_collector(MIGRATIONS)


@migration
def m001_sessions_and_messages(db: Database) -> None:
    db["sessions"].create(
        {"id": str, "title": str, "created_at": str, "updated_at": str, "patient_id": str, "model": str},
        pk="id", not_null={"title", "created_at", "updated_at"},
    )
    db["messages"].create(
        {"id": int, "session_id": str, "seq": int, "role": str, "kind": str, "text": str,
         "status": str, "created_at": str, "patient_id": str, "trace": str},
        pk="id", foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "seq", "role", "kind", "text", "status", "created_at"},
    )
    db["messages"].create_index(["session_id", "seq"], unique=True)


@migration
def m002_sessions_updated_index(db: Database) -> None:
    db["sessions"].create_index(["updated_at"])


@migration
def m003_record_heads(db: Database) -> None:
    """A copy of the EHR's chain head, kept outside the record so a rolled-back record shows
    (``ehr_db.heads`` writes and reads it after each EHR commit, with this exact shape)."""
    db.execute(heads.CREATE_TABLE)


def migrate(db: Database) -> list[str]:
    """Apply the migrations not yet recorded; returns the names applied."""
    return sqlite.migrate(db, STORE, MIGRATIONS)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def make_title(question: str) -> str:
    text = " ".join(question.split())
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1].rstrip() + "…"


# -- the store ----------------------------------------------------------------------------

class SessionStore:
    """Sessions and their messages in one SQLite file (one short connection per call)."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else sessions_db_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionStoreError(f"cannot create the sessions folder: {exc.strerror}") from None
        with self._db() as db:
            migrate(db)

    @contextmanager
    def _db(self) -> Iterator[Database]:
        try:
            db = sqlite.connect(self.path)
        except sqlite.DatabaseCorrupt as exc:
            raise SessionStoreError(str(exc)) from None
        except sqlite3.Error as exc:
            raise SessionStoreError(f"cannot open the session database ({type(exc).__name__})") from None
        try:
            yield db
        except sqlite3.Error as exc:
            raise SessionStoreError(f"the session database failed ({type(exc).__name__})") from None
        finally:
            db.close()

    def create_session(self, *, model: str | None = None, patient_id: str | None = None,
                       title: str = "New session") -> Session:
        now = _now()
        row = {"id": uuid.uuid4().hex, "title": title, "created_at": now, "updated_at": now,
               "patient_id": patient_id, "model": model}
        with self._db() as db:
            db["sessions"].insert(row)
        return Session(**row)

    def add_exchange(self, session_id: str, question: str, reply: str, *, kind: str = "answer",
                     status: str = "complete", patient_id: str | None = None,
                     trace: list[dict] | None = None) -> None:
        """Store one question and its reply together (one transaction)."""
        if status not in STATUSES or kind not in REPLY_KINDS:
            raise SessionStoreError(f"unknown reply status or kind ({status}, {kind})")
        now = _now()
        trace_json = json.dumps(trace, default=str) if trace is not None else None
        with self._db() as db, write_transaction(db):
            session = self._row(db, session_id)
            seq = db.execute("SELECT max(seq) FROM messages WHERE session_id = ?", [session_id]).fetchone()[0] or 0
            insert = ("INSERT INTO messages (session_id, seq, role, kind, text, status, created_at, patient_id, trace)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
            db.conn.execute(insert, [session_id, seq + 1, "user", "question", question, status, now, patient_id, None])
            db.conn.execute(insert, [session_id, seq + 2, "assistant", kind, reply, status, now, patient_id, trace_json])
            title = make_title(question) if seq == 0 and session["title"] == "New session" else session["title"]
            db.conn.execute("UPDATE sessions SET updated_at = ?, patient_id = ?, title = ? WHERE id = ?",
                            [now, patient_id, title, session_id])

    def set_patient(self, session_id: str, patient_id: str | None) -> None:
        with self._db() as db, write_transaction(db):
            self._row(db, session_id)
            db.conn.execute("UPDATE sessions SET patient_id = ?, updated_at = ? WHERE id = ?",
                            [patient_id, _now(), session_id])

    def record_heads(self) -> list[dict]:
        """The copies of the EHR's chain head kept here (``ehr_db.heads``)."""
        with self._db() as db:
            return [dict(r) for r in db.query("SELECT * FROM record_heads ORDER BY at")]

    def get_session(self, session_id: str) -> Session:
        with self._db() as db:
            return self._session(db, self._row(db, session_id))

    def list_sessions(self, limit: int = 50) -> list[Session]:
        """Most recently used first."""
        with self._db() as db:
            rows = db.query("SELECT * FROM sessions ORDER BY updated_at DESC, rowid DESC LIMIT ?", [limit])
            return [self._session(db, r) for r in rows]

    def latest_session(self) -> Session | None:
        sessions = self.list_sessions(limit=1)
        return sessions[0] if sessions else None

    def messages(self, session_id: str) -> list[StoredMessage]:
        with self._db() as db:
            self._row(db, session_id)
            rows = db.query("SELECT * FROM messages WHERE session_id = ? ORDER BY seq", [session_id])
            return [
                StoredMessage(r["seq"], r["role"], r["kind"], r["text"], r["status"], r["patient_id"],
                              json.loads(r["trace"]) if r["trace"] else None)
                for r in rows
            ]

    def history(self, session_id: str) -> list[tuple[str, str]]:
        """(role, text) of completed exchanges only, oldest first: the agent's context."""
        return [(m.role, m.text) for m in self.messages(session_id) if m.status == "complete"]

    @staticmethod
    def _row(db: Database, session_id: str) -> dict:
        rows = list(db.query("SELECT * FROM sessions WHERE id = ?", [session_id]))
        if not rows:
            raise SessionStoreError("that session no longer exists")
        return rows[0]

    @staticmethod
    def _session(db: Database, row: dict) -> Session:
        count = db.execute("SELECT count(*) FROM messages WHERE session_id = ?", [row["id"]]).fetchone()[0]
        return Session(row["id"], row["title"], row["created_at"], row["updated_at"], row["patient_id"],
                       row["model"], count, SessionStore._patients(db, row))

    @staticmethod
    def _patients(db: Database, row: dict) -> tuple[str, ...]:
        """The session's patients in the order they first appear: the open patient of each
        message, and the ``patient_id`` argument of each tool call in its trace."""
        rows = db.execute(
            "SELECT seq, patient_id FROM messages WHERE session_id = ? AND patient_id IS NOT NULL "
            "UNION ALL SELECT m.seq, json_extract(e.value, '$.args.patient_id') FROM messages m, "
            "json_each(CASE WHEN json_valid(m.trace) THEN m.trace ELSE '[]' END) e "
            "WHERE m.session_id = ? AND json_type(e.value, '$.args.patient_id') = 'text' ORDER BY 1",
            [row["id"], row["id"]],
        ).fetchall()
        seen = dict.fromkeys(str(pid) for _, pid in rows if pid)
        if row["patient_id"]:
            seen.setdefault(row["patient_id"])
        return tuple(seen)
