"""Backing up and restoring the EHR database file, through SQLite's online backup API.

Invariants:
- ``backup`` copies a consistent snapshot while terminals keep working (the backup API reads
  under SQLite's locks), into a temporary file beside the target that is checked
  (``integrity_check``), switched to a rollback journal (one self-contained file), fsynced and
  only then renamed to its name. A backup is 0600 and never overwrites a file.
- ``restore`` refuses a file that is not an SQLite database, fails the integrity check, is not
  an EHR database, was made by a newer version (a migration this one does not know), or whose
  audit chain does not verify. The file is first copied (backup API) to a temporary file beside
  the live database, checked and migrated there, and fsynced; the live database is never
  touched until the copy has passed.
- The swap is atomic. With no live database the checked file is renamed into place. With a
  readable one, the live database is first copied aside (``<db>.replaced-<UTC time>``, kept),
  then the checked file is copied over it through the backup API: one write transaction on the
  destination, so a crash leaves the old or the new content whole and a terminal's open
  connection sees one or the other. (A plain rename there would leave open connections
  writing to the unlinked old file, and could pair the new file with the old -wal.) A damaged
  live database (what a restore is usually for) is kept byte for byte, and the checked file
  renamed over it.
- The restored database records the restore on its audit chain (event ``restore``: the file
  names, never contents) and the anchor file is reset to its head.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sqlite_utils import Database

from common.locations import PRIVATE_FILE_MODE
from common.sqlite import DatabaseCorrupt, opened, write_transaction
from ehr_db import audit
from ehr_db.errors import DatabaseNotReady, EhrError
from ehr_db.migrations import MIGRATIONS, applied_migrations, migrate


class BackupError(EhrError):
    """A backup could not be written, or a file was refused for restore (the message says why)."""


@dataclass(frozen=True)
class BackupReport:
    path: Path
    patients: int
    audit: audit.Verdict | None  # None: a database from before the chain (``appliance init`` adds it)

    def summary(self) -> str:
        if self.audit is None:
            return f"EHR backup written to {self.path}: {self.patients} patients, audit log not chained yet"
        state = "verified" if self.audit.ok else f"BROKEN ({self.audit.first_bad.describe()})"
        return (f"EHR backup written to {self.path}: {self.patients} patients, audit log of "
                f"{audit.rows_text(self.audit.rows)}, chain {state}")


@dataclass(frozen=True)
class RestoreReport:
    source: Path
    database: Path
    replaced_kept_as: Path | None
    patients: int
    audit_rows: int
    migrations_applied: tuple[str, ...]

    def summary(self) -> str:
        lines = [f"EHR restored from {self.source}: {self.patients} patients, audit log of "
                 f"{audit.rows_text(self.audit_rows)} (chain verified)"]
        if self.migrations_applied:
            lines.append(f"  brought up to date: {', '.join(self.migrations_applied)}")
        if self.replaced_kept_as:
            lines.append(f"  the database it replaced is kept as {self.replaced_kept_as}")
        return "\n".join(lines)


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _new_private(path: Path) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_into(source: sqlite3.Connection, target_path: Path) -> None:
    """Copy ``source`` into a new private file at ``target_path``, as one rollback-journal file."""
    _new_private(target_path)
    target = sqlite3.connect(str(target_path))
    try:
        source.backup(target)
        target.execute("PRAGMA journal_mode = DELETE")
        target.commit()
    finally:
        target.close()
    _fsync(target_path)


def _patients(db: Database) -> int:
    return db.execute("SELECT count(*) FROM patients").fetchone()[0]


def backup(db_path: Path, dest: Path) -> BackupReport:
    """Write a checked copy of the EHR at ``db_path`` to ``dest`` (a file name, or a folder
    to put ``ehr-<UTC time>.sqlite`` in)."""
    db_path, dest = Path(db_path), Path(dest)
    if not db_path.exists():
        raise DatabaseNotReady("the health record database has not been created")
    if dest.is_dir():
        dest = dest / f"ehr-{_stamp()}.sqlite"
    if dest.exists():
        raise BackupError(f"{dest} already exists; choose a new name")
    if not dest.parent.is_dir():
        raise BackupError(f"folder {dest.parent} does not exist")
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with opened(db_path, read_only=True) as live:
            _copy_into(live.conn, tmp)
        with opened(tmp, read_only=True) as copy:
            if copy.execute("PRAGMA integrity_check").fetchall() != [("ok",)]:
                raise BackupError("the copy failed SQLite's integrity check; the database may be damaged")
            verdict = audit.verify(copy) if audit.is_chained(copy) else None
            patients = _patients(copy)
        os.replace(tmp, dest)
        _fsync(dest.parent)
    except sqlite3.Error as exc:
        raise BackupError(f"the backup could not be written ({type(exc).__name__}: {exc})") from None
    except OSError as exc:
        raise BackupError(f"the backup could not be written: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return BackupReport(dest, patients, verdict)


def _check_restorable(path: Path, name: str) -> tuple[tuple[str, ...], int, int]:
    """Refuse ``path`` unless it is a whole, current-or-older EHR whose audit chain verifies;
    migrate it. Returns (migrations applied, patients, audit rows)."""
    with opened(path) as db:
        if db.execute("PRAGMA integrity_check").fetchall() != [("ok",)]:
            raise BackupError(f"{name} fails SQLite's integrity check; it was not restored")
        tables = set(db.table_names())
        if not {"patients", "audit_log"} <= tables or not applied_migrations(db):
            raise BackupError(f"{name} is not an EHR database; it was not restored")
        unknown = set(applied_migrations(db)) - {fn.__name__ for fn in MIGRATIONS}
        if unknown:
            raise BackupError(f"{name} was written by a newer version of the appliance "
                              f"(unknown migration {sorted(unknown)[0]}); it was not restored")
        applied = tuple(migrate(db))
        verdict = audit.verify(db)
        if not verdict.ok:
            raise BackupError(f"the audit chain of {name} does not verify ({verdict.first_bad.describe()}); "
                              "it was not restored")
        return applied, _patients(db), verdict.rows


def _readable(path: Path) -> bool:
    """Whether SQLite can read the live database well enough to copy it through the backup API."""
    try:
        with opened(path, read_only=True) as db:
            return db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    except (DatabaseCorrupt, sqlite3.DatabaseError):
        return False


def _set_aside(db_path: Path, kept: Path) -> None:
    """Keep a damaged live database byte for byte (with its -wal), then drop its -wal and -shm
    so they are never paired with the restored file. Nothing can use a damaged database, so the
    rename that follows replaces nothing anyone reads."""
    for suffix in ("", "-wal"):
        part = Path(f"{db_path}{suffix}")
        if part.exists():
            _new_private(Path(f"{kept}{suffix}"))
            with open(part, "rb") as src, open(f"{kept}{suffix}", "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
    for suffix in ("-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)


def restore(db_path: Path, source: Path, *, actor: str) -> RestoreReport:
    """Replace the EHR at ``db_path`` with the checked content of ``source`` (see the module
    docstring); the replaced database is kept beside it."""
    db_path, source = Path(db_path), Path(source)
    if not source.is_file():
        raise BackupError(f"{source} is not a file")
    if source.resolve() == db_path.resolve():
        raise BackupError("that is the live database itself")
    tmp = db_path.with_name(f".{db_path.name}.restore-{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)  # a leftover of an interrupted restore
    kept: Path | None = None
    try:
        try:
            reader = sqlite3.connect(f"file:{source.resolve()}?mode=ro", uri=True)
            try:
                _copy_into(reader, tmp)
            finally:
                reader.close()
        except sqlite3.DatabaseError:
            raise BackupError(f"{source.name} is not a readable SQLite database; it was not restored") from None
        try:
            applied, patients, rows = _check_restorable(tmp, source.name)
        except DatabaseCorrupt:
            raise BackupError(f"{source.name} fails SQLite's integrity check; it was not restored") from None
        except audit.AuditError as exc:
            raise BackupError(f"{source.name}: {exc}; it was not restored") from None
        _fsync(tmp)
        if db_path.exists():
            kept = db_path.with_name(f"{db_path.name}.replaced-{_stamp()}")
            if _readable(db_path):
                with opened(db_path, read_only=True) as live:
                    _copy_into(live.conn, kept)
                with opened(tmp, read_only=True) as checked, opened(db_path) as live:
                    checked.conn.backup(live.conn)  # one write transaction on the live database
            else:
                _set_aside(db_path, kept)
                os.replace(tmp, db_path)
                _fsync(db_path.parent)
        else:
            for orphan in (Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
                orphan.unlink(missing_ok=True)  # left without their database: never pair them with a new one
            os.replace(tmp, db_path)
            _fsync(db_path.parent)
        with opened(db_path) as db:
            with write_transaction(db):
                audit.append(db, actor, "restore", {"details": {
                    "from": source.name, "replaced_kept_as": kept.name if kept else None}}, None)
            audit.update_anchor(db, force=True)
    except sqlite3.Error as exc:
        raise BackupError(f"the restore failed ({type(exc).__name__}); the live database was not changed"
                          if kept is None else f"the restore failed ({type(exc).__name__}); the previous "
                          f"database is kept as {kept}") from None
    except OSError as exc:
        raise BackupError(f"the restore failed: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return RestoreReport(source, db_path, kept, patients, rows + 1, applied)

