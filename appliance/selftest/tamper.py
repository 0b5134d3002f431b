"""The tamper suite: what someone with a shell, or a bad copy, can do to the record,
and whether `audit verify` (or a backup's check) catches it.

``run_tamper_suite(workdir)`` builds a data home in ``workdir`` (accounts and sessions databases,
the EHR with its demo load and a few writes; never the live one) and runs:
- every clinical table: one row edited, one deleted, one inserted, with the sqlite3 shell's
  powers (``rows:<table>:<how>``);
- rollbacks: the record alone (then a new write), the record with its anchor file (then writes
  past the head its copies kept), the record with its anchor deleted, and the whole data home
  with a later backup's manifest shown to verify (``rollback:...``);
- the whole data home rolled back with no later backup consulted: every copy rolled back
  together, which the README documents as undetectable (counted apart);
- bytes flipped at ``flips`` random offsets of a backup, each checked as ``ehr restore``
  checks it (``ehr_db.backup.verify_backup``) (``backup-flip:<offset>``).

It returns ``{"cases", "detected", "undetected": [names], "documented_undetectable",
"documented": [names], "seconds"}``; ``cases == detected + len(undetected) +
documented_undetectable``. Every case but the documented one must be detected. Invariant: it
writes only under ``workdir``, and changes no environment variable.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

HOME_FILES = ("ehr.sqlite", "ehr.sqlite.audit-head", "accounts.sqlite", "sessions.sqlite")
DEFAULT_FLIPS = 100
TEXT_COLUMNS = {"patients": "family", "encounters": "status", "conditions": "display",
                "medication_requests": "dosage", "allergy_intolerances": "reaction", "observations": "unit",
                "document_references": "text"}


def _write(home: Path, n: int = 1) -> None:
    from ehr_db.repository import EhrRepository

    repo = EhrRepository(home / "ehr.sqlite")
    for i in range(n):
        repo.add_allergy("abc-123", f"latex {i}", "contact rash", "mild", author="tamper-suite")


def _build_home(home: Path) -> None:
    from appliance.accounts import AccountStore
    from appliance.accounts.sessions import SessionStore
    from ehr_db.repository import EhrRepository
    from ehr_db.setup import ensure_database

    home.mkdir(parents=True)
    AccountStore(home / "accounts.sqlite").prepare()
    SessionStore(home / "sessions.sqlite")
    ensure_database(home / "ehr.sqlite")
    repo = EhrRepository(home / "ehr.sqlite")
    repo.prescribe_medication("pat-005", "metoprolol", "25 mg", "twice daily", author="tamper-suite")
    repo.save_clinical_note("pat-006", "progress", "Seen today; stable.", author="tamper-suite")
    _write(home)


def _copy_home(source: Path, dest: Path, names=HOME_FILES) -> Path:
    """The files of a data home, as someone with a shell copies them (each database checkpointed
    first, so the copy is whole without its -wal)."""
    dest.mkdir(parents=True)
    for name in names:
        if name.endswith(".sqlite"):
            conn = sqlite3.connect(source / name)
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
        if (source / name).exists():
            shutil.copy2(source / name, dest / name)
    return dest


def _put_back(saved: Path, home: Path, names) -> None:
    for name in names:
        for suffix in ("-wal", "-shm"):
            Path(f"{home / name}{suffix}").unlink(missing_ok=True)
        shutil.copy2(saved / name, home / name)


def _caught(home: Path, backups: tuple[Path, ...] = ()) -> bool:
    from ehr_db.repository import EhrRepository

    return not EhrRepository(home / "ehr.sqlite").verify_audit(backups).ok


# -- clinical rows --------------------------------------------------------------------------------
def _tamper_row(db_path: Path, table: str, how: str) -> None:
    conn = sqlite3.connect(db_path)  # the shell's defaults: foreign keys off, no audit
    try:
        row_id = conn.execute(f"SELECT id FROM {table} ORDER BY id LIMIT 1").fetchone()[0]
        column = TEXT_COLUMNS[table]
        if how == "edit":
            conn.execute(f"UPDATE {table} SET {column} = {column} || ' (changed)' WHERE id = ?", [row_id])
        elif how == "delete":
            conn.execute(f"DELETE FROM {table} WHERE id = ?", [row_id])
        else:
            columns = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
            picked = ", ".join("'tamper-inserted-1'" if c == "id" else c for c in columns)
            conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} FROM {table} WHERE id = ?",
                         [row_id])
        conn.commit()
    finally:
        conn.close()


def _row_cases(base: Path, work: Path, record: Callable[[str, bool], None]) -> None:
    from ehr_db.custody import TABLES

    for table in TABLES:
        for how in ("edit", "delete", "insert"):
            home = _copy_home(base, work / f"rows-{table}-{how}")
            _tamper_row(home / "ehr.sqlite", table, how)
            record(f"rows:{table}:{how}", _caught(home))
            shutil.rmtree(home)


# -- rollbacks ------------------------------------------------------------------------------------
def _rollback_cases(base: Path, work: Path, record: Callable[[str, bool], None],
                    documented: Callable[[str, bool], None]) -> None:
    from ehr_db import audit
    from ehr_db.backup import backup

    def scenario(name: str, names, *, then_writes: int = 0, drop_anchor: bool = False,
                 later_backup: bool = False, is_documented: bool = False) -> None:
        home = _copy_home(base, work / f"rollback-{name}")
        saved = _copy_home(home, work / f"rollback-{name}-saved")
        _write(home, 3)
        backups = work / f"rollback-{name}-backups"
        backups.mkdir()
        if later_backup:
            backup(home / "ehr.sqlite", backups / "later.sqlite")
        _put_back(saved, home, names)
        if drop_anchor:
            audit.anchor_path(home / "ehr.sqlite").unlink(missing_ok=True)
        if then_writes:
            _write(home, then_writes)
        caught = _caught(home, (backups,) if later_backup else ())
        (documented if is_documented else record)(f"rollback:{name}", caught)
        for folder in (home, saved, backups):
            shutil.rmtree(folder)

    scenario("record-alone", ("ehr.sqlite",))
    scenario("record-alone-then-a-write", ("ehr.sqlite",), then_writes=1)
    scenario("record-and-anchor", ("ehr.sqlite", "ehr.sqlite.audit-head"))
    scenario("record-and-anchor-then-writes-past-the-kept-head", ("ehr.sqlite", "ehr.sqlite.audit-head"),
             then_writes=6)
    scenario("record-with-anchor-deleted", ("ehr.sqlite",), drop_anchor=True)
    scenario("whole-data-home-with-a-later-backup", HOME_FILES, later_backup=True)
    scenario("whole-data-home-no-later-backup", HOME_FILES, is_documented=True)


# -- backups ------------------------------------------------------------------------------------
def _flip_cases(base: Path, work: Path, flips: int, seed: int, record: Callable[[str, bool], None]) -> None:
    from ehr_db.backup import backup, verify_backup
    from ehr_db.backup_manifest import manifest_path

    folder = work / "backup-flips"
    folder.mkdir()
    good = backup(base / "ehr.sqlite", folder / "good.sqlite").path
    original, manifest = good.read_bytes(), manifest_path(good).read_text()
    rng = random.Random(seed)
    for n in range(flips):
        offset = rng.randrange(len(original))
        data = bytearray(original)
        for i in range(offset, min(offset + rng.randint(1, 16), len(data))):
            data[i] ^= rng.randint(1, 255)
        copy = folder / f"flip-{n}.sqlite"
        copy.write_bytes(bytes(data))
        manifest_path(copy).write_text(manifest)
        record(f"backup-flip:{offset}", not verify_backup(copy).ok)
        copy.unlink()
        manifest_path(copy).unlink()
    shutil.rmtree(folder)


def run_tamper_suite(workdir: Path, *, flips: int = DEFAULT_FLIPS, seed: int = 24) -> dict:
    """Run every case (module docstring) under ``workdir``; the counts and names."""
    started = time.perf_counter()
    work = Path(workdir) / "tamper-suite"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    base = work / "home"
    _build_home(base)
    out: dict = {"cases": 0, "detected": 0, "undetected": [], "documented_undetectable": 0, "documented": []}

    def record(name: str, caught: bool) -> None:
        out["cases"] += 1
        if caught:
            out["detected"] += 1
        else:
            out["undetected"].append(name)

    def documented(name: str, caught: bool) -> None:
        out["cases"] += 1
        if caught:
            out["detected"] += 1
        else:
            out["documented_undetectable"] += 1
            out["documented"].append(name)

    try:
        _row_cases(base, work, record)
        _rollback_cases(base, work, record, documented)
        _flip_cases(base, work, flips, seed, record)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def summary(report: dict) -> str:
    """One line, as selftest prints it."""
    missed = f"; UNDETECTED: {', '.join(report['undetected'])}" if report["undetected"] else ""
    return (f"{report['cases']} tamper cases, {report['detected']} detected, {len(report['undetected'])} undetected, "
            f"{report['documented_undetectable']} documented as undetectable (every copy rolled back together)"
            f"{missed} ({report['seconds']} s)")
