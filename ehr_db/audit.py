"""The EHR's tamper-evident audit log: every ``audit_log`` row is a link of a SHA-256 hash chain.

A row holds ``seq`` (1, 2, 3, ... in ``id`` order), ``prev_hash`` (the ``row_hash`` of the row
before it; ``GENESIS`` for the first) and ``row_hash`` = sha256 of the canonical serialisation
of its chained fields (``CHAINED_FIELDS``: seq, at, actor, tool, arguments, result, outcome)
followed by ``prev_hash`` (``canonical``: one compact JSON array, UTF-8). Writes, imports, the
demo load and non-write events (approvals, rejections, overrides, safety findings, restores:
``EVENT_KINDS``) all go through ``append``, inside the caller's write transaction. A write's
``result`` holds the record's id and the approval it ran under (``ehr_db.repository``), so the
decision and its safety findings are chained with the write.

The chain's head (last seq and hash) is kept twice more:
- ``audit_head``, one row in the database, moved forward by a trigger as each row is inserted
  (a trigger also refuses an insert that does not extend the head, and an update of the head
  that does not follow the log). ``append`` chains from this head, not from the last row, so a
  row appended after a truncation leaves a visible gap instead of hiding it.
- an anchor file beside the database (``<db>.audit-head``: seq and hash as JSON), rewritten after
  each commit (``ehr_db.heads.keep``, which also keeps the other copies). It may lag behind the database (a crash between commit and rewrite, two writers
  racing), never run ahead of it: ``verify`` only requires that the log still holds the
  anchored row with the anchored hash.

What ``verify`` detects, even when the database's triggers were dropped first:
- a row whose content was edited (any chained field; its hash no longer matches);
- a row deleted from the middle (a gap in ``seq``, and the next row's ``prev_hash``);
- rows reordered, or their ids swapped (``seq`` out of order, ``prev_hash`` broken);
- a row inserted without the chain API (no or wrong hash, or a duplicate ``seq``);
- the last rows deleted (the log ends before ``audit_head`` says it does, or, when the head
  was edited too, before the anchor file's row);
- the append-only triggers removed (reported, as a sign of tampering, after any bad row).
What it cannot detect: SHA-256 here is not keyed, so someone who can write the database file
AND the anchor file can rewrite the log and recompute every hash, or truncate both
consistently; and a deleted anchor file is only reported as missing. Columns outside
``CHAINED_FIELDS`` are not covered. The clinical rows are covered through the ledger
(``ehr_db.custody``), and the head's other copies (``ehr_db.heads``: the accounts and sessions
databases, backups' manifests) catch a record and anchor rolled back or rewritten together.

Invariant: ``verify`` and ``rows_for_patient`` only read; nothing here logs row contents.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from common.sqlite import now_iso
from ehr_db.errors import EhrError

GENESIS = "0" * 64
CHAINED_FIELDS = ("seq", "at", "actor", "tool", "arguments", "result", "outcome")
# Non-write events recorded on the same chain (``record_event``): the ``tool`` column holds the kind.
EVENT_KINDS = ("approval", "rejection", "override", "safety_findings", "restore")
TRIGGERS = ("audit_log_no_update", "audit_log_no_delete", "audit_log_chained", "audit_log_head",
            "audit_head_forward", "audit_head_no_delete")
ANCHOR_SUFFIX = ".audit-head"
MAX_PROBLEMS = 100  # named per verification (the rest counted); the first is the one that matters


class AuditError(EhrError):
    """The audit log cannot be verified at all (not chained yet, or not an EHR database)."""


def canonical(row: Mapping[str, Any], prev_hash: str) -> bytes:
    """The bytes a row's hash is taken over: its chained fields as stored, then ``prev_hash``."""
    return json.dumps([row[f] for f in CHAINED_FIELDS] + [prev_hash], ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")


def row_hash(row: Mapping[str, Any], prev_hash: str) -> str:
    return hashlib.sha256(canonical(row, prev_hash)).hexdigest()


def append(db: Database, actor: str, tool: str, arguments: dict, result: dict | None,
           outcome: str = "success", at: str | None = None) -> tuple[int, str]:
    """Append one chained row inside the caller's write transaction; returns (seq, row_hash)."""
    head = db.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
    if head is None:
        raise AuditError("the audit log has no chain head (database not migrated)")
    row = {
        "seq": head[0] + 1,
        "at": at or now_iso(),
        "actor": actor,
        "tool": tool,
        "arguments": json.dumps(arguments, sort_keys=True),  # ASCII: nothing invisible in a review
        "result": json.dumps(result, sort_keys=True) if result is not None else None,
        "outcome": outcome,
    }
    digest = row_hash(row, head[1])
    db.execute(
        "INSERT INTO audit_log (seq, at, actor, tool, arguments, result, outcome, prev_hash, row_hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [*(row[f] for f in CHAINED_FIELDS), head[1], digest],
    )
    return row["seq"], digest


def chain_existing_rows(db: Database) -> tuple[int, str]:
    """Give every row (in id order) its seq and hashes; for the migration that adds the chain."""
    prev, seq = GENESIS, 0
    rows = list(db.query(f"SELECT id, {', '.join(f for f in CHAINED_FIELDS if f != 'seq')} FROM audit_log ORDER BY id"))
    for row in rows:
        seq += 1
        row = {**row, "seq": seq}
        digest = row_hash(row, prev)
        db.execute("UPDATE audit_log SET seq = ?, prev_hash = ?, row_hash = ? WHERE id = ?",
                   [seq, prev, digest, row["id"]])
        prev = digest
    return seq, prev


# -- verification ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """One finding: the row (``id``/``seq`` as stored; None when not about one row) and why."""

    reason: str
    id: int | None = None
    seq: int | None = None
    table: str | None = None  # a clinical row's table and id, for a problem about one row
    row_id: str | None = None

    def describe(self) -> str:
        if (self.id is None and self.seq is None) or self.table is not None:  # a clinical row's reason names it
            return self.reason
        where = f"row id {self.id} (seq {self.seq})" if self.id is not None else f"seq {self.seq}"
        return f"{where}: {self.reason}"


@dataclass
class Verdict:
    """The outcome of ``verify``: ``ok`` when no problem was found."""

    rows: int
    head_seq: int | None
    head_hash: str | None
    anchor: dict | None = None
    problems: list[Problem] = field(default_factory=list)
    more_problems: int = 0
    notes: list[str] = field(default_factory=list)
    clinical_rows: int | None = None  # rows checked against their digests (None: not checked)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_bad(self) -> Problem | None:
        return self.problems[0] if self.problems else None

    def add(self, problem: Problem) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(problem)
        else:
            self.more_problems += 1

    def summary(self) -> str:
        if self.ok:
            head = (self.head_hash or "")[:16]
            rows = "" if self.clinical_rows is None else f"; {self.clinical_rows} clinical row(s) match their digests"
            return f"audit chain verified: {rows_text(self.rows)}, head seq {self.head_seq} ({head}...){rows}"
        first = self.first_bad
        located = first.id is not None or first.seq is not None
        head = "record BROKEN: " if first.table is not None else \
            "audit chain BROKEN at " if located else "audit chain BROKEN: "
        lines = [head + first.describe()]
        lines += [f"  also {p.describe()}" for p in self.problems[1:]]
        if self.more_problems:
            lines.append(f"  and {self.more_problems} more problem(s)")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "ok": self.ok, "rows": self.rows, "head_seq": self.head_seq, "head_hash": self.head_hash,
            "anchor": self.anchor, "first_bad": asdict(self.first_bad) if self.first_bad else None,
            "problems": [asdict(p) for p in self.problems], "more_problems": self.more_problems,
            "notes": self.notes, "clinical_rows": self.clinical_rows,
        }


def rows_text(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def is_chained(db: Database) -> bool:
    return "audit_head" in db.table_names() and "row_hash" in db["audit_log"].columns_dict


def verify(db: Database, anchor: dict | None = None, on_row: Callable[[dict], None] | None = None) -> Verdict:
    """Walk the whole chain in ``id`` order (see the module docstring for what is detected);
    ``on_row`` sees every row as it is read (``ehr_db.custody`` gathers the ledger's claims)."""
    if "audit_log" not in db.table_names():
        raise AuditError("this is not an EHR database (no audit_log table)")
    if not is_chained(db):
        raise AuditError("the audit log has no hash chain yet; run `appliance init` to add it")
    head = db.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
    verdict = Verdict(rows=0, head_seq=None, head_hash=None, anchor=anchor)
    prev, expected, last_hash = GENESIS, 1, GENESIS
    hashes: dict[int, str] = {}
    cursor = db.conn.execute(f"SELECT id, prev_hash, row_hash, {', '.join(CHAINED_FIELDS)} FROM audit_log ORDER BY id")
    names = [c[0] for c in cursor.description]
    for values in cursor:
        row = dict(zip(names, values))
        verdict.rows += 1
        if on_row is not None:
            on_row(row)
        seq = row["seq"]
        if row["row_hash"] != row_hash(row, row["prev_hash"] or ""):
            verdict.add(Problem("its content does not match its hash (the row was edited, or written "
                                "without the chain)", row["id"], seq))
        elif seq != expected:
            found = "an earlier row" if isinstance(seq, int) and seq < expected else "a later row"
            verdict.add(Problem(f"expected seq {expected} here but found {found} (seq {seq}): rows were deleted, "
                                "inserted or reordered", row["id"], seq))
        elif row["prev_hash"] != prev:
            verdict.add(Problem("it does not follow the row before it (a row was deleted, inserted or moved)",
                                row["id"], seq))
        prev, last_hash = row["row_hash"], row["row_hash"]
        expected = seq + 1 if isinstance(seq, int) else expected + 1
        if isinstance(seq, int):
            hashes.setdefault(seq, row["row_hash"])
    last_seq = expected - 1
    if head is None:
        verdict.add(Problem("the chain head row (audit_head) was deleted"))
    else:
        verdict.head_seq, verdict.head_hash = head[0], head[1]
        if head[0] > last_seq:
            verdict.add(Problem(f"missing: the log ends at seq {last_seq} but its head records seq {head[0]} "
                                "(the last rows were deleted)", None, last_seq + 1))
        elif head[0] != last_seq or head[1] != (last_hash if verdict.rows else GENESIS):
            verdict.add(Problem(f"the chain head (seq {head[0]}) does not match the last row (seq {last_seq}): "
                                "rows were added without the chain or the head was edited", None, head[0]))
    if anchor is None:
        verdict.notes.append("no anchor file: the end of the log is checked against the database's own head only")
    else:
        a_seq, a_hash = anchor.get("seq"), anchor.get("hash")
        if not isinstance(a_seq, int) or a_seq > last_seq:
            verdict.add(Problem(f"missing: the anchor file records seq {a_seq} but the log ends at seq {last_seq} "
                                "(rows were deleted from the end, or the database was replaced by an older copy)",
                                None, last_seq + 1))
        elif a_seq > 0 and hashes.get(a_seq) != a_hash:
            verdict.add(Problem("its hash differs from the anchor file's: the log was rewritten up to here",
                                None, a_seq))
    present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    missing = [t for t in TRIGGERS if t not in present]
    if missing:
        verdict.add(Problem(f"the audit log's protective triggers were removed ({', '.join(missing)})"))
    return verdict


def rows_for_patient(db: Database, patient_id: str) -> list[dict]:
    """Every audit row about ``patient_id`` (writes and events), in chain order."""
    return [dict(r) for r in db.query(
        "SELECT id, seq, at, actor, tool, arguments, result, outcome, row_hash FROM audit_log "
        "WHERE json_valid(arguments) AND json_extract(arguments, '$.patient_id') = ? ORDER BY id",
        [patient_id],
    )]


# -- the anchor file ---------------------------------------------------------------------------
def anchor_path(db_path: Path) -> Path:
    return Path(db_path).with_name(Path(db_path).name + ANCHOR_SUFFIX)


def read_anchor(db_path: Path) -> dict | None:
    """The anchored head, or None when there is no anchor file; an unreadable one counts as empty."""
    try:
        data = json.loads(anchor_path(db_path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"seq": None, "hash": None, "unreadable": True}
    return data if isinstance(data, dict) else {"seq": None, "hash": None, "unreadable": True}


def write_anchor(db_path: Path, seq: int, digest: str, *, force: bool = False, **more: Any) -> None:
    """Record the head beside the database (atomically, 0600), with ``more`` fields (the
    record's id and timeline, ``ehr_db.heads``). Never moves the anchor back unless ``force``
    (a restore, whose database is older by design)."""
    target = anchor_path(db_path)
    if not force:
        current = read_anchor(db_path)
        if current and isinstance(current.get("seq"), int) and current["seq"] >= seq:
            return
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump({"seq": seq, "hash": digest, "written_at": now_iso(), **more}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
