"""The EHR's crash test: writer processes killed with SIGKILL at random moments, then the
invariants checked from the database file alone (docs/design.md §13).

``crash_test(directory)`` creates an EHR database in ``directory`` and runs rounds: each round
starts a child (``python -m ehr_db.durability DB LOG ...``) that writes through
``EhrRepository`` as fast as it can, rotating prescriptions, allergies and notes, each with its
own idempotency key; the parent kills it with SIGKILL after a random delay. Before each write
the child appends "begin KEY" to a side file, after the commit "commit KEY" followed by fsync.
The next round's child first resends the key the killed one had begun (the same key, as a
client resending an unanswered write would), then goes on. After the last round the parent
checks, from the files alone:

- ``PRAGMA integrity_check`` is ``ok``;
- every key logged as committed is in the database (``write_keys``) with its record: no
  committed write lost;
- every write row has exactly one audit row naming it, and every audit row of a write names a
  row that exists: no write without its audit row, no audit row without its write;
- every key is performed at most once (a resent key never made a second row).

It returns a ``CrashReport`` with the counts; ``appliance selftest`` runs it on a temporary
data home. Invariant: it never touches a database it did not create (``directory`` must not
already hold one).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from common.locations import PROJECT_ROOT

DB_NAME = "ehr-crash-test.sqlite"
LOG_NAME = "crash-test-writes.log"
AUTHOR = "crash-test"
PATIENT = "abc-123"
WRITE_TABLES = {"prescribe_medication": "medication_requests", "add_allergy": "allergy_intolerances",
                "save_clinical_note": "document_references"}
READY = "ready"
WRITER_THREADS = 3


@dataclass(frozen=True)
class CrashReport:
    rounds: int
    attempted: int  # distinct writes the children began (each kill cut a few short)
    committed_logged: int  # keys the children logged after their commit (fsynced)
    rows: int  # write rows in the database
    audit_rows: int  # audit rows of writes
    resent: int  # sends of keys a killed child had begun, by the next child (not in ``attempted``)
    lost: int  # logged committed keys missing from the database: must be 0
    unaudited: int  # write rows without exactly one audit row: must be 0
    orphan_audits: int  # audit rows of writes whose row does not exist: must be 0
    duplicated: int  # keys performed more than once: must be 0
    integrity: str
    seconds: float

    @property
    def ok(self) -> bool:
        return (self.integrity == "ok" and not (self.lost or self.unaudited or self.orphan_audits or self.duplicated)
                and self.rows == self.audit_rows)

    def summary(self) -> str:
        return (f"{self.rounds} kills, {self.attempted} writes begun, {self.committed_logged} logged as committed, "
                f"{self.rows} rows and {self.audit_rows} audit rows found, {self.resent} resent; lost {self.lost}, "
                f"unaudited {self.unaudited}, orphan audit rows {self.orphan_audits}, duplicated {self.duplicated}; "
                f"integrity {self.integrity} ({self.seconds:.1f} s)")

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def crash_test(directory: Path | str, *, min_writes: int = 1000, min_rounds: int = 10, max_seconds: float = 50.0,
               kill_after: tuple[float, float] = (0.05, 1.0), seed: int | None = None) -> CrashReport:
    """Kill writers until ``min_writes`` writes were begun over at least ``min_rounds`` kills (or
    ``max_seconds`` passed), then check the file; see the module docstring."""
    from ehr_db.setup import ensure_database

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    db, log = directory / DB_NAME, directory / LOG_NAME
    if db.exists():
        raise FileExistsError(f"{db} exists: the crash test only writes to a database it creates")
    ensure_database(db)
    log.write_bytes(b"")
    rng = random.Random(seed)
    started = time.monotonic()
    rounds, resent, resend = 0, 0, []
    while True:
        attempted = _begun(log)
        done = attempted >= min_writes and rounds >= min_rounds
        if done or time.monotonic() - started > max_seconds:
            break
        rounds += 1
        resent += len(resend)
        _kill_one_writer(db, log, f"r{rounds:04d}", resend, rng.uniform(*kill_after))
        resend = _in_flight(log)
    report = check(db, log)
    return CrashReport(rounds=rounds, attempted=_begun(log), resent=resent, seconds=time.monotonic() - started,
                       **report)


def _kill_one_writer(db: Path, log: Path, prefix: str, resend: list[str], delay: float) -> None:
    args = [sys.executable, "-m", "ehr_db.durability", str(db), str(log), prefix, *resend]
    child = subprocess.Popen(args, cwd=str(PROJECT_ROOT), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        if child.stdout.readline().decode().strip() != READY:  # imports done: writing starts now
            raise RuntimeError("the crash-test writer did not start")
        time.sleep(delay)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()


def _lines(log: Path) -> list[tuple[str, str]]:
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        kind, _, key = line.partition(" ")
        if kind in ("begin", "commit") and key:
            out.append((kind, key))
    return out


def _begun(log: Path) -> int:
    """Distinct writes begun (a resent key counts once)."""
    return len({key for kind, key in _lines(log) if kind == "begin"})


def _in_flight(log: Path) -> list[str]:
    """The keys begun and never logged as committed (their outcome unknown), in order; a key
    resent and then committed is no longer in flight."""
    state: dict[str, str] = {}
    for kind, key in _lines(log):
        state[key] = kind if state.get(key) != "commit" else "commit"
    return [key for key, kind in state.items() if kind == "begin"]


def check(db: Path, log: Path) -> dict:
    """The invariants, from the database file and the side log alone (see the module docstring)."""
    committed = {key for kind, key in _lines(log) if kind == "commit"}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        integrity = "; ".join(r[0] for r in conn.execute("PRAGMA integrity_check"))
        keyed = dict(conn.execute("SELECT idempotency_key, record_id FROM write_keys"))
        duplicated = conn.execute("SELECT count(*) - count(DISTINCT idempotency_key) FROM write_keys").fetchone()[0]
        rows: set[str] = set()
        for table in WRITE_TABLES.values():
            rows |= {r[0] for r in conn.execute(f"SELECT id FROM {table} WHERE author = ? AND source = 'appliance'",
                                                [AUTHOR])}
        audited: dict[str, int] = {}
        for _tool, result in conn.execute(
                f"SELECT tool, result FROM audit_log WHERE actor = ? AND tool IN ({','.join('?' * len(WRITE_TABLES))})",
                [AUTHOR, *WRITE_TABLES]):
            record = (json.loads(result) or {}).get("id") if result else None
            audited[record] = audited.get(record, 0) + 1
    finally:
        conn.close()
    return {
        "committed_logged": len(committed),
        "rows": len(rows),
        "audit_rows": sum(audited.values()),
        "lost": sum(1 for key in committed if keyed.get(key) not in rows),
        "unaudited": sum(1 for r in rows if audited.get(r, 0) != 1),
        "orphan_audits": sum(n for r, n in audited.items() if r not in rows),
        "duplicated": duplicated,
        "integrity": integrity,
    }


# -- the child: writes until it is killed --------------------------------------------------------
def _writer(db: str, log: str, prefix: str, resend: list[str], threads: int = WRITER_THREADS) -> None:
    """Write until killed: first the keys to resend, then ``threads`` threads each writing its
    own keys (their writes queue on the write lock; more of them are in flight at a kill)."""
    from ehr_db.repository import EhrRepository

    repo = EhrRepository(db)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    writes = (
        lambda key, i: repo.prescribe_medication(PATIENT, "metformin", f"{500 + i % 7} mg", "twice daily", None,
                                                 author=AUTHOR, idempotency_key=key),
        lambda key, i: repo.add_allergy(PATIENT, f"test substance {i}", "rash", "mild", author=AUTHOR,
                                        idempotency_key=key),
        lambda key, i: repo.save_clinical_note(PATIENT, "progress", f"Crash test note {i}.", author=AUTHOR,
                                               idempotency_key=key),
    )
    def write(keys) -> None:
        for key in keys:
            i = int(key.rsplit("-", 1)[1])
            os.write(fd, f"begin {key}\n".encode())  # in the OS's buffers: a SIGKILL keeps it
            writes[i % len(writes)](key, i)
            os.write(fd, f"commit {key}\n".encode())
            os.fsync(fd)

    print(READY, flush=True)
    write(resend)
    def own_keys(thread: int):
        return (f"{prefix}-{thread}-{i:07d}" for i in itertools.count())

    workers = [threading.Thread(target=write, args=(own_keys(t),), daemon=True) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    _writer(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
