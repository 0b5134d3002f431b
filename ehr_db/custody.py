"""The clinical rows under the audit chain: row digests, the ledger that accounts for them, and
verification of the whole record.

A clinical row's digest is sha256 of its table name and its non-NULL columns, sorted by name,
as stored (``row_digest``: one compact JSON array; a column added later as NULL leaves it
unchanged). Every audited event that writes clinical rows (a clinician's write, an import,
the demo load, a restore's migration) records, in the same transaction:
- one ledger entry per row in ``row_digests``: (the event's seq, table, row id, the digest it
  replaced or NULL for a new row, the digest it wrote or NULL for a removed row);
- in its audit row's ``result``, ``rows``: the number of entries and ``sha256`` over them
  (``ledger_digest``), so the ledger is under the chain: an entry edited, added or removed
  no longer matches the audit row that wrote it.

``verify_record`` is ``audit.verify`` (the chain, the anchor file) plus one pass over the
ledger and one over each clinical table. It names:
- each row whose digest no longer matches the one last recorded for it (edited);
- each audited row that is missing (deleted);
- each row no audit row accounts for (inserted);
- a ledger that disagrees with its audit row, or a row changed outside the record between two
  audited writes (an entry's ``before`` is not the digest recorded before it);
- a record older than a copy of its chain head kept outside it (``ehr_db.heads``).
A record made before row digests existed has them added by migration ``m007_row_digests``:
its rows are taken as they stood then (an audited ``custody_baseline`` event), which
``verify`` notes.

Invariants: verification only reads; messages name tables, row ids and seqs, never contents.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlite_utils import Database

from ehr_db import audit

# The clinical tables, in reference order (the same set as ``migrations``: patients and
# ``CLINICAL_TABLES``; a test keeps them equal).
TABLES = ("patients", "encounters", "conditions", "medication_requests", "allergy_intolerances", "observations",
          "document_references")
LEDGER = "row_digests"
BASELINE_TOOL = "custody_baseline"
LEDGER_TRIGGERS = ("row_digests_no_update", "row_digests_no_delete", "row_digests_current")


def _blob(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"blob": bytes(value).hex()}
    raise TypeError(type(value).__name__)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_blob)


def digester(table: str, columns: list[str]) -> Callable[[tuple], str]:
    """``row_digest`` for many rows of one query (the column order is sorted once)."""
    order = sorted(range(len(columns)), key=lambda i: columns[i])
    names = [columns[i] for i in order]
    encode, sha256 = _ENCODER.encode, hashlib.sha256

    def digest(values: tuple) -> str:
        pairs = [[names[k], values[i]] for k, i in enumerate(order) if values[i] is not None]
        return sha256(encode([table, pairs]).encode("utf-8")).hexdigest()

    return digest


def row_digest(table: str, columns: Iterable[str], values: Iterable[Any]) -> str:
    """sha256 of ``[table, [[column, value], ...]]`` as compact JSON: non-NULL columns sorted by
    name, values as SQLite returns them (an integer and a real differ, so do a number and text)."""
    return digester(table, list(columns))(tuple(values))


def digest_of(db: Database, table: str, row_id: str) -> str | None:
    """The stored row's digest, or None when there is no such row."""
    cursor = db.conn.execute(f"SELECT * FROM [{table}] WHERE id = ?", [row_id])
    found = cursor.fetchone()
    if found is None:
        return None
    return row_digest(table, [c[0] for c in cursor.description], found)


def ledger_digest(entries: Iterable[tuple[str, str, str | None, str | None]]) -> str:
    """sha256 over (table, row id, before, after) entries in (table, row id) order, one line
    each: the two names length-prefixed, the digests (or '-')."""
    h = hashlib.sha256()
    for table, row_id, before, after in sorted(entries, key=lambda e: (e[0], e[1])):
        h.update(f"{len(table)}:{table}|{len(row_id)}:{row_id}|{before or '-'}|{after or '-'}\n".encode())
    return h.hexdigest()


def has_ledger(db: Database) -> bool:
    return LEDGER in db.table_names()


class RowChanges:
    """The clinical rows one audited event writes: call ``before`` ahead of each change and
    ``after`` once it is made (inside the event's transaction), then ``append``."""

    _MISSING = object()

    def __init__(self, db: Database):
        self.db = db
        self._before: dict[tuple[str, str], str | None] = {}
        self._after: dict[tuple[str, str], str | None] = {}
        self._journal: list[tuple[dict, tuple[str, str], object]] = []  # for ``undo``

    def _set(self, store: dict, key: tuple[str, str], value: str | None) -> None:
        self._journal.append((store, key, store.get(key, self._MISSING)))
        store[key] = value

    def before(self, table: str, row_id: str) -> str | None:
        key = (table, row_id)
        if key not in self._before:
            self._set(self._before, key, digest_of(self.db, table, row_id))
        return self._before[key]

    def after(self, table: str, row_id: str) -> str | None:
        key = (table, row_id)
        if key not in self._before:
            raise RuntimeError("RowChanges.after() without before(): the row's earlier digest is unknown")
        self._set(self._after, key, digest_of(self.db, table, row_id))
        return self._after[key]

    def mark(self) -> int:
        """A point to ``undo`` to (a savepoint rolled back)."""
        return len(self._journal)

    def undo(self, mark: int) -> None:
        while len(self._journal) > mark:
            store, key, old = self._journal.pop()
            if old is self._MISSING:
                store.pop(key, None)
            else:
                store[key] = old

    def entries(self) -> list[tuple[str, str, str | None, str | None]]:
        """(table, row id, before, after) of the rows that changed, in (table, row id) order."""
        return sorted((t, i, self._before[(t, i)], after) for (t, i), after in self._after.items()
                      if self._before[(t, i)] != after)

    def __len__(self) -> int:
        return len(self.entries())


def claim(entries: list[tuple[str, str, str | None, str | None]]) -> dict:
    """What the audit row records about its ledger entries."""
    return {"n": len(entries), "sha256": ledger_digest(entries)}


def save_entries(db: Database, seq: int, entries: list[tuple[str, str, str | None, str | None]]) -> None:
    db.conn.executemany(f"INSERT INTO {LEDGER} (seq, tbl, row_id, before, digest) VALUES (?, ?, ?, ?, ?)",
                        [(seq, *e) for e in entries])


def append(db: Database, actor: str, tool: str, arguments: dict, result: dict | None,
           changes: RowChanges | None = None, outcome: str = "success", at: str | None = None) -> tuple[int, str]:
    """``audit.append`` for an event that wrote clinical rows: its result carries ``rows`` (the
    ledger's count and digest) and the entries are saved under its seq, in the caller's
    transaction. Without a ledger (a database not migrated yet) it is ``audit.append``."""
    return append_entries(db, actor, tool, arguments, result, changes.entries() if changes is not None else [],
                          outcome, at)


def append_entries(db: Database, actor: str, tool: str, arguments: dict, result: dict | None,
                   entries: list[tuple[str, str, str | None, str | None]], outcome: str = "success",
                   at: str | None = None) -> tuple[int, str]:
    """``append`` with the ledger entries given (a bulk load that digests its rows in one pass)."""
    if entries and has_ledger(db):
        result = {**(result or {}), "rows": claim(entries)}
    seq, digest = audit.append(db, actor, tool, arguments, result, outcome, at)
    if entries and has_ledger(db):
        save_entries(db, seq, entries)
    return seq, digest


def baseline(db: Database) -> int:
    """Take every clinical row as it stands into the ledger (one audited event); returns the
    rows taken. For the migration that adds row digests to a record that already has rows."""
    entries = []
    for table in TABLES:
        cursor = db.conn.execute(f"SELECT * FROM [{table}]")
        columns = [c[0] for c in cursor.description]
        index, digest = columns.index("id"), digester(table, columns)
        entries += [(table, values[index], None, digest(values)) for values in cursor]
    if entries:
        seq, _ = audit.append(db, "appliance-setup", BASELINE_TOOL, {"reason": "row digests added to this record"},
                              {"rows": claim(entries)})
        save_entries(db, seq, entries)
    return len(entries)


# -- verification ------------------------------------------------------------------------------
@dataclass
class _Claims:
    """What the chain's rows say about the ledger, gathered while ``audit.verify`` walks it."""

    by_seq: dict[int, dict] = field(default_factory=dict)
    baseline: tuple[int, str, int] | None = None  # (seq, at, rows)

    def visit(self, row: dict) -> None:
        result = row.get("result")
        if not isinstance(result, str) or '"rows"' not in result or not isinstance(row.get("seq"), int):
            return
        try:
            rows = json.loads(result).get("rows")
        except (ValueError, AttributeError):
            return
        if isinstance(rows, dict):
            self.by_seq[row["seq"]] = rows
            if row.get("tool") == BASELINE_TOOL and self.baseline is None:
                self.baseline = (row["seq"], row.get("at"), rows.get("n"))


def _row_problem(verdict: audit.Verdict, table: str, row_id: str, reason: str, seq: int | None = None) -> None:
    verdict.add(audit.Problem(f"{table} row {row_id}: {reason}", None, seq, table=table, row_id=row_id))


def check_ledger(db: Database, verdict: audit.Verdict, claims: _Claims) -> None:
    """One pass over the ledger and one over each clinical table (see the module docstring)."""
    expected: dict[tuple[str, str], tuple[str | None, int]] = {}
    entries: list[tuple[str, str, str | None, str | None]] = []
    current: int | None = None

    def close(seq: int | None) -> None:
        if seq is None:
            return
        said = claims.by_seq.pop(seq, None)
        if said is None:
            verdict.add(audit.Problem("row digests were recorded under this seq, but its audit row records none "
                                      "(the ledger was written outside the record)", None, seq))
        elif said != claim(entries):
            verdict.add(audit.Problem("its row digests no longer match what its audit row records (ledger "
                                      "entries were edited, added or removed)", None, seq))

    cursor = db.conn.execute(f"SELECT seq, tbl, row_id, before, digest FROM {LEDGER} ORDER BY seq, tbl, row_id")
    for seq, table, row_id, before, after in cursor:
        if seq != current:
            close(current)
            current, entries = seq, []
        entries.append((table, row_id, before, after))
        known = expected.get((table, row_id))
        if before != (known[0] if known else None):
            where = f"after seq {known[1]}" if known else "before it was first recorded"
            _row_problem(verdict, table, row_id, f"was changed outside the record {where} (the write at seq {seq} "
                                                 "found another version)", seq)
        expected[(table, row_id)] = (after, seq)
    close(current)
    for seq, said in sorted(claims.by_seq.items()):
        if said.get("n"):
            verdict.add(audit.Problem(f"its audit row records {said.get('n')} row digest(s) but the ledger holds "
                                      "none (ledger entries were removed)", None, seq))
    checked = 0
    for table in TABLES:
        cursor = db.conn.execute(f"SELECT * FROM [{table}]")
        columns = [c[0] for c in cursor.description]
        index, digest = columns.index("id"), digester(table, columns)
        for values in cursor:
            checked += 1
            row_id = values[index]
            known = expected.pop((table, row_id), None)
            if known is None or known[0] is None:
                _row_problem(verdict, table, str(row_id), "no audit row accounts for it (inserted outside the record)")
            elif digest(values) != known[0]:
                _row_problem(verdict, table, row_id, f"no longer matches the digest recorded at seq {known[1]} "
                                                     "(edited outside the record)", known[1])
    for (table, row_id), (after, seq) in sorted(expected.items()):
        if after is not None:
            _row_problem(verdict, table, row_id, f"is missing: written at seq {seq} and never removed by an audited "
                                                 "write (deleted outside the record)", seq)
    verdict.clinical_rows = checked
    present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    missing = [t for t in LEDGER_TRIGGERS if t not in present]
    if missing:
        verdict.add(audit.Problem(f"the row digests' protective triggers were removed ({', '.join(missing)})"))


def verify_record(db: Database, anchor: dict | None = None, heads: Callable[[Database], tuple[list, list]] | None = None
                  ) -> audit.Verdict:
    """The chain (``audit.verify``), then the clinical rows against the ledger, then (``heads``:
    a function giving problems and notes) the chain head's copies outside the record."""
    claims = _Claims()
    verdict = audit.verify(db, anchor, on_row=claims.visit)
    if has_ledger(db):
        check_ledger(db, verdict, claims)
        if claims.baseline is not None:
            seq, at, n = claims.baseline
            verdict.notes.append(f"{n} clinical row(s) were taken as they stood when row digests were added to this "
                                 f"record (seq {seq}, {at}); changes made before then cannot be checked")
    else:
        verdict.notes.append("this record has no row digests yet (made by an older version): its clinical rows are "
                             "not checked; `appliance init` adds them")
    if heads is not None:
        problems, notes = heads(db)
        for problem in problems:
            verdict.add(problem)
        verdict.notes.extend(notes)
    return verdict


def table_digests(db: Database) -> dict[str, dict]:
    """Per clinical table: its row count and sha256 over (row id, row digest) in id order (a
    backup's manifest keeps these)."""
    out = {}
    for table in TABLES:
        cursor = db.conn.execute(f"SELECT * FROM [{table}] ORDER BY id")
        columns = [c[0] for c in cursor.description]
        index, digest = columns.index("id"), digester(table, columns)
        h, n = hashlib.sha256(), 0
        for values in cursor:
            n += 1
            row_id = str(values[index])
            h.update(f"{len(row_id)}:{row_id}|{digest(values)}\n".encode())
        out[table] = {"rows": n, "sha256": h.hexdigest()}
    return out
