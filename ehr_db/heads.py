"""Copies of the record's chain head kept outside it, so a record rolled back shows.

A head copy is ``{record_id, timeline, seq, hash, at}``:
- ``record_id``: the hash of the record's first audit row (the same in every copy and backup
  of one record; a record started afresh has another);
- ``timeline``: the hash of the record's latest ``restore`` event (its id when it was never
  restored). A restore starts a new timeline, so the heads of the replaced one are told apart
  from a record that lost its latest writes.
Copies live in the anchor file (``<db>.audit-head``), in a ``record_heads`` table of the
accounts and sessions databases beside the record (their stores create the table: see
``appliance.accounts`` and ``appliance.accounts.sessions``; a missing file is never created here), and in
every backup's manifest (``ehr_db.backup``).

Invariants:
- ``keep`` runs after each commit that moves the head. A copy moves forward only when it lies
  on the record's own chain (its row at the copy's seq has the copy's hash, same timeline, or
  an earlier timeline of this record); a copy that is ahead of the record, off its chain, or
  from a timeline the record does not hold is kept as evidence. Only ``force`` (a restore)
  replaces every copy. A failure is logged, never raised: the write it follows has committed.
- ``compare`` names a copy that is ahead of the record ("the record is older than the head
  kept in ..."), one whose seq holds another hash in the record, and one from a timeline the
  record does not hold. Heads of other records are noted, not failures.
What cannot be detected: every copy rolled back together (the whole data home, with no later
backup's manifest shown to ``audit verify --backups``). The hashes are not keyed.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sqlite_utils import Database

from common.sqlite import DatabaseCorrupt, now_iso, opened, write_transaction
from ehr_db import audit

log = logging.getLogger("ehr_db.heads")

KEEPERS = ("accounts.sqlite", "sessions.sqlite")  # beside the record (``common.locations``' names)
TABLE = "record_heads"
# The table's shape in the stores that keep a copy (the accounts and sessions databases create it
# through their own migrations with this statement; ``ehr_db`` cannot import them).
CREATE_TABLE = """CREATE TABLE record_heads (
    record_id TEXT PRIMARY KEY,      -- the EHR's id (the hash of its first audit row)
    timeline TEXT NOT NULL,          -- the hash of its latest restore event (or its id)
    seq INTEGER NOT NULL,            -- the chain head: last seq and its hash
    hash TEXT NOT NULL,
    at TEXT NOT NULL
)"""
MANIFEST_SUFFIX = ".manifest.json"


@dataclass(frozen=True)
class Facts:
    """What a head copy is compared with: the record's id, timelines and head."""

    record_id: str | None
    timeline: str | None
    timelines: frozenset[str]
    head_seq: int
    head_hash: str

    def head(self, at: str | None = None) -> dict:
        return {"record_id": self.record_id, "timeline": self.timeline, "seq": self.head_seq,
                "hash": self.head_hash, "at": at or now_iso()}


def facts(db: Database) -> Facts | None:
    """The record's facts, or None for a database without the chain."""
    if not audit.is_chained(db):
        return None
    head = db.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
    if head is None:
        return None
    first = db.execute("SELECT row_hash FROM audit_log WHERE seq = 1").fetchone()
    if first is None:
        return Facts(None, None, frozenset(), head[0], head[1])
    restores = [r[0] for r in db.execute("SELECT row_hash FROM audit_log WHERE tool = 'restore' ORDER BY seq")]
    return Facts(first[0], restores[-1] if restores else first[0], frozenset([first[0], *restores]),
                 head[0], head[1])


def _hash_at(db: Database, seq: int) -> str | None:
    found = db.execute("SELECT row_hash FROM audit_log WHERE seq = ?", [seq]).fetchone()
    return found[0] if found else None


def _replaceable(copy: dict | None, f: Facts, db: Database) -> bool:
    """Whether moving ``copy`` to the record's head loses no evidence (module docstring)."""
    if copy is None or not isinstance(copy.get("seq"), int):
        return True
    if copy.get("record_id") not in (None, f.record_id):
        return False
    timeline = copy.get("timeline")
    if timeline is not None and timeline != f.timeline:
        return timeline in f.timelines
    if copy["seq"] >= f.head_seq:
        return False
    return _hash_at(db, copy["seq"]) == copy.get("hash")


# -- keeping -----------------------------------------------------------------------------------
def keep(db: Database, *, force: bool = False) -> None:
    """Move every copy of the head forward after a commit (``force``: reset them all, for a
    restore). Never raises."""
    try:
        path = _db_path(db)
        f = facts(db)
        if path is None or f is None or f.record_id is None:
            return
        if force or _replaceable(audit.read_anchor(path), f, db):
            audit.write_anchor(path, f.head_seq, f.head_hash, force=True, record_id=f.record_id, timeline=f.timeline)
        for name in KEEPERS:
            _keep_in(path.parent / name, f, db, force)
    except Exception as exc:  # noqa: BLE001 - OSError, sqlite3 errors...: the commit already happened
        log.warning("chain head copies not updated: %s", type(exc).__name__)


def _keep_in(path: Path, f: Facts, db: Database, force: bool) -> None:
    if not path.exists():
        return
    with opened(path) as keeper:
        if TABLE not in keeper.table_names():
            return  # a store not migrated yet: `appliance init` adds the table
        with write_transaction(keeper):
            if force:
                keeper.execute(f"DELETE FROM {TABLE}")
            else:
                found = _rows(keeper, f.record_id)
                if not _replaceable(found[0] if found else None, f, db):
                    return
            head = f.head()
            keeper.execute(f"INSERT OR REPLACE INTO {TABLE} (record_id, timeline, seq, hash, at) VALUES (?, ?, ?, ?, ?)",
                           [head["record_id"], head["timeline"], head["seq"], head["hash"], head["at"]])


def _rows(keeper: Database, record_id: str | None = None) -> list[dict]:
    where, params = ("WHERE record_id = ?", [record_id]) if record_id is not None else ("", [])
    cursor = keeper.execute(f"SELECT record_id, timeline, seq, hash, at FROM {TABLE} {where}", params)
    return [dict(zip(("record_id", "timeline", "seq", "hash", "at"), r)) for r in cursor.fetchall()]


def _db_path(db: Database) -> Path | None:
    files = [r[2] for r in db.execute("PRAGMA database_list") if r[1] == "main"]
    return Path(files[0]) if files and files[0] else None


# -- reading the copies ------------------------------------------------------------------------
def copies(db_path: Path, backups: Iterable[Path] = (), *, anchor: bool = True) -> tuple[list[tuple[str, dict]], list[str]]:
    """(where, head) of every copy found beside the record at ``db_path`` (the anchor file unless
    ``anchor=False``, the keepers) and in the manifests under ``backups`` (files or folders),
    and notes about copies that could not be read."""
    db_path = Path(db_path)
    found: list[tuple[str, dict]] = []
    notes: list[str] = []
    if anchor:
        current = audit.read_anchor(db_path)
        if current is not None:
            found.append(("the anchor file", {**current, "at": current.get("written_at")}))
    for name in KEEPERS:
        path = db_path.parent / name
        if not path.exists():
            continue
        try:
            with opened(path, read_only=True) as keeper:
                if TABLE in keeper.table_names():
                    found += [(name, row) for row in _rows(keeper)]
        except (sqlite3.Error, DatabaseCorrupt):
            notes.append(f"{name} cannot be read: the head it keeps was not compared")
    for manifest in manifests(backups):
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            head = data["head"]
            if not isinstance(head, dict):
                raise ValueError
        except (OSError, ValueError, KeyError, TypeError):
            notes.append(f"backup manifest {manifest.name} cannot be read: its head was not compared")
            continue
        found.append((f"backup manifest {manifest.name}", head))
    return found, notes


def manifests(paths: Iterable[Path]) -> list[Path]:
    """The backup manifests named by ``paths``: manifest files, backups (their manifest beside
    them) and folders (the manifests in them)."""
    out: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            out += sorted(path.glob("*" + MANIFEST_SUFFIX))
        elif path.name.endswith(MANIFEST_SUFFIX):
            out.append(path)
        else:
            out.append(path.with_name(path.name + MANIFEST_SUFFIX))
    return out


def compare(db: Database, found: list[tuple[str, dict]]) -> tuple[list[audit.Problem], list[str]]:
    """Problems (a rolled-back or rewritten record) and notes, for the copies ``found``."""
    f = facts(db)
    problems: list[audit.Problem] = []
    notes: list[str] = []
    if f is None:
        return problems, notes
    others: set[str] = set()
    for where, head in found:
        seq, digest, at = head.get("seq"), head.get("hash"), head.get("at") or "time unknown"
        if head.get("unreadable"):
            continue  # the anchor file's own check reports it
        if f.record_id is None or head.get("record_id") not in (None, f.record_id):
            others.add(where)
            continue
        if not isinstance(seq, int):
            notes.append(f"the head kept in {where} cannot be read")
            continue
        timeline = head.get("timeline")
        if timeline is not None and timeline != f.timeline:
            if timeline not in f.timelines:
                problems.append(audit.Problem(
                    f"the record is older than the head kept in {where} ({at}): that head follows a restore this "
                    "record does not hold (the record was rolled back)", None, seq))
            continue
        if seq > f.head_seq:
            problems.append(audit.Problem(
                f"the record is older than the head kept in {where} ({at}): the record ends at seq {f.head_seq} "
                "(it was rolled back, or replaced by an older copy)", None, seq))
        elif seq > 0 and _hash_at(db, seq) != digest:
            problems.append(audit.Problem(
                f"the record's row differs from the head kept in {where} ({at}): the record was rewritten or "
                "replaced by another copy", None, seq))
    if others:
        notes.append(f"{', '.join(sorted(others))} also keep(s) the head of another record (one this record "
                     "replaced, or a backup of another record): not compared")
    return problems, notes


def startup_problems(db_path: Path) -> list[str]:
    """What start-up says (``appliance init``, the EHR server): each copy of the head that shows
    the record older than it or rewritten. Reads only; an unreadable record says nothing here
    (its own check reports it)."""
    db_path = Path(db_path)
    if not db_path.exists():
        return []
    try:
        with opened(db_path, read_only=True) as db:
            found, _ = copies(db_path)
            problems, _ = compare(db, found)
    except (sqlite3.Error, DatabaseCorrupt):
        return []
    return [p.describe() for p in problems]
