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
  names and the head it replaced, never contents) and every copy of the head (the anchor file,
  the accounts and sessions databases: ``ehr_db.heads``) is reset to its head; the restore
  starts a new timeline, so the replaced record's heads are not taken for a rollback.
- Every backup has a manifest beside it (``ehr_db.backup_manifest``): the whole file's
  sha256 and size, its page size and count, its chain head (record id, timeline, seq, hash)
  and per clinical table the row count and a digest over its rows' digests
  (``custody.table_digests``). ``check`` (``ehr restore`` first, ``ehr backup --verify``)
  names everything that disagrees: the file's hash or size against the manifest, SQLite's
  integrity check, the schema, the audit chain and row digests (``custody.verify_record``), the
  tables and head against the manifest. A backup without a manifest (an older version's) is
  checked by everything else, with a note.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlite_utils import Database

from common.locations import PRIVATE_FILE_MODE
from common.sqlite import DatabaseCorrupt, opened, write_transaction
from ehr_db import audit, custody, heads
from ehr_db.backup_manifest import (
    file_sha256,
    make_manifest,
    manifest_path,
    read_manifest,
    write_private_json,
)
from ehr_db.errors import DatabaseNotReady, EhrError
from ehr_db.migrations import MIGRATIONS, applied_migrations, migrate


class BackupError(EhrError):
    """A backup could not be written, or a file was refused for restore (the message says why)."""


@dataclass(frozen=True)
class BackupReport:
    path: Path
    patients: int
    audit: audit.Verdict | None  # None: a database from before the chain (``appliance init`` adds it)
    manifest: Path | None = None

    def summary(self) -> str:
        if self.audit is None:
            return f"EHR backup written to {self.path}: {self.patients} patients, audit log not chained yet"
        state = "verified" if self.audit.ok else f"BROKEN ({self.audit.first_bad.describe()})"
        text = (f"EHR backup written to {self.path}: {self.patients} patients, audit log of "
                f"{audit.rows_text(self.audit.rows)}, chain {state}")
        return text + (f"\n  manifest: {self.manifest}" if self.manifest else "")


@dataclass
class BackupCheck:
    """What ``check`` found: ``problems`` (each a disagreement, named) and ``notes``."""

    path: Path
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    manifest: dict | None = None
    patients: int | None = None
    audit_rows: int | None = None
    clinical_rows: int | None = None
    head_seq: int | None = None
    migrations_applied: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def refusal(self) -> str:
        return f"{self.path.name} was refused: {'; '.join(self.problems)}; it was not restored"

    def summary(self) -> str:
        if not self.ok:
            lines = [f"backup {self.path} does NOT verify:"] + [f"  {p}" for p in self.problems]
        else:
            against = "matches its manifest" if self.manifest else "has no manifest to compare with"
            rows = f", {self.clinical_rows} clinical rows" if self.clinical_rows is not None else ""
            lines = [f"backup {self.path} verified: the file {against}; integrity ok; {self.patients} patients, "
                     f"audit log of {audit.rows_text(self.audit_rows or 0)}{rows} match their digests, "
                     f"head seq {self.head_seq}"]
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])


@dataclass(frozen=True)
class RestoreReport:
    source: Path
    database: Path
    replaced_kept_as: Path | None
    patients: int
    audit_rows: int
    migrations_applied: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        lines = [f"EHR restored from {self.source}: {self.patients} patients, audit log of "
                 f"{audit.rows_text(self.audit_rows)} (chain verified)"]
        lines += [f"  note: {note}" for note in self.notes]
        if self.migrations_applied:
            lines.append(f"  brought up to date: {', '.join(self.migrations_applied)}")
        if self.replaced_kept_as:
            lines.append(f"  the database it replaced is kept as {self.replaced_kept_as}")
        return "\n".join(lines)


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


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
    if dest.exists() or manifest_path(dest).exists():
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
            verdict = custody.verify_record(copy) if audit.is_chained(copy) else None
            patients = _patients(copy)
            manifest = make_manifest(tmp, copy)
        manifest["file"] = dest.name
        os.replace(tmp, dest)
        write_private_json(manifest_path(dest), manifest)
        _fsync(dest.parent)
    except sqlite3.Error as exc:
        raise BackupError(f"the backup could not be written ({type(exc).__name__}: {exc})") from None
    except OSError as exc:
        raise BackupError(f"the backup could not be written: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return BackupReport(dest, patients, verdict, manifest_path(dest))


def check(source: Path, work: Path) -> BackupCheck:
    """Check the backup at ``source`` (module docstring); ``work``: a new file's path for the
    checked (and migrated) copy, left there for a restore to use."""
    source = Path(source)
    result = BackupCheck(source)
    manifest, problem = read_manifest(source)
    result.manifest = manifest
    if problem:
        result.problems.append(problem)
    elif manifest is None:
        result.notes.append("no manifest beside it (a backup from an older version): checked by its integrity, "
                            "audit chain and row digests only")
    else:
        size = source.stat().st_size
        if file_sha256(source) != manifest.get("sha256"):
            result.problems.append("its sha256 differs from its manifest's (the file changed after the backup)")
        if size != manifest.get("bytes") or size // max(1, int(manifest.get("page_size") or 1)) != manifest.get("pages"):
            result.problems.append("its size or page count differs from its manifest's")
    try:
        reader = sqlite3.connect(f"file:{source.resolve()}?mode=ro", uri=True)
        try:
            _copy_into(reader, work)
        finally:
            reader.close()
    except (sqlite3.Error, UnicodeDecodeError, ValueError, OverflowError):  # a damaged header: many ways to fail
        result.problems.append("it is not a readable SQLite database")
        return result
    try:
        _check_copy(work, source.name, result)
    except (DatabaseCorrupt, sqlite3.DatabaseError, UnicodeDecodeError, ValueError, OverflowError):
        result.problems.append("it fails SQLite's integrity check")
    except audit.AuditError as exc:
        result.problems.append(str(exc))
    return result


def _check_copy(path: Path, name: str, result: BackupCheck) -> None:
    """The database checks of ``check``, on the copy at ``path`` (migrated when it passes)."""
    with opened(path) as db:
        if db.execute("PRAGMA integrity_check").fetchall() != [("ok",)]:
            result.problems.append("it fails SQLite's integrity check")
            return
        tables = set(db.table_names())
        if not {"patients", "audit_log"} <= tables or not applied_migrations(db):
            result.problems.append("it is not an EHR database")
            return
        unknown = set(applied_migrations(db)) - {fn.__name__ for fn in MIGRATIONS}
        if unknown:
            result.problems.append(f"it was written by a newer version of the appliance (unknown migration "
                                   f"{sorted(unknown)[0]})")
            return
        manifest = result.manifest
        if manifest is not None:
            found = custody.table_digests(db)
            for table, want in sorted(manifest["tables"].items()):
                got = found.get(table)
                if got != want:
                    result.problems.append(f"table {table}'s rows differ from its manifest's ({(got or {}).get('rows')} "
                                           f"rows, the manifest {want.get('rows') if isinstance(want, dict) else '?'})")
        result.migrations_applied = tuple(migrate(db))
        verdict = custody.verify_record(db)
        if not verdict.ok:
            result.problems.append(f"the audit chain of {name} does not verify ({verdict.first_bad.describe()})"
                                   + (f" and {len(verdict.problems) - 1} more problem(s)" if len(verdict.problems) > 1
                                      else ""))
        result.notes += [n for n in verdict.notes if "no anchor file" not in n]
        head = (manifest or {}).get("head")
        if isinstance(head, dict) and isinstance(head.get("seq"), int):
            found_hash = db.execute("SELECT row_hash FROM audit_log WHERE seq = ?", [head["seq"]]).fetchone()
            if found_hash is None or found_hash[0] != head.get("hash"):
                result.problems.append(f"its audit chain at seq {head['seq']} differs from its manifest's head")
        result.patients, result.audit_rows = _patients(db), verdict.rows
        result.clinical_rows, result.head_seq = verdict.clinical_rows, verdict.head_seq


def verify_backup(source: Path) -> BackupCheck:
    """``appliance ehr backup --verify PATH``: ``check`` on a temporary copy; nothing is restored."""
    source = Path(source)
    if not source.is_file():
        raise BackupError(f"{source} is not a file")
    with tempfile.TemporaryDirectory(prefix="ehr-backup-check-") as tmp:
        return check(source, Path(tmp) / "copy.sqlite")


def _replaced_head(db_path: Path) -> dict | None:
    """The head of the record a restore replaces (kept in the restore event), when readable."""
    if not db_path.exists():
        return None
    try:
        with opened(db_path, read_only=True) as live:
            f = heads.facts(live)
    except (DatabaseCorrupt, sqlite3.Error):
        return None
    return None if f is None else {"record_id": f.record_id, "seq": f.head_seq, "hash": f.head_hash}


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
        inspected = check(source, tmp)
        if not inspected.ok:
            raise BackupError(inspected.refusal())
        applied, patients, rows = inspected.migrations_applied, inspected.patients, inspected.audit_rows
        _fsync(tmp)
        replaced = _replaced_head(db_path)
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
                    "from": source.name, "replaced_kept_as": kept.name if kept else None,
                    "replaced_head": replaced}}, None)
            heads.keep(db, force=True)
    except sqlite3.Error as exc:
        raise BackupError(f"the restore failed ({type(exc).__name__}); the live database was not changed"
                          if kept is None else f"the restore failed ({type(exc).__name__}); the previous "
                          f"database is kept as {kept}") from None
    except OSError as exc:
        raise BackupError(f"the restore failed: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return RestoreReport(source, db_path, kept, patients, rows + 1, applied, tuple(inspected.notes))

