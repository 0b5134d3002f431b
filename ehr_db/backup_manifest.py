"""A backup's manifest: the file beside each backup (``<backup>.manifest.json``, 0600) that
says what the backup held when it was written, so ``ehr_db.backup.check`` can name what changed.

Invariants:
- The manifest holds the whole file's sha256 and size, its page size and count, its chain head
  (record id, timeline, seq, hash) and per clinical table the row count and a digest over its
  rows' digests (``custody.table_digests``), under the format ``MANIFEST_FORMAT``.
- It is written to a private temporary file, fsynced and renamed into place
  (``write_private_json``): a reader sees the whole manifest or none.
- ``read_manifest`` never raises for a bad file: it says there is none, or what is wrong with it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from sqlite_utils import Database

from common.locations import PRIVATE_FILE_MODE
from common.sqlite import now_iso
from ehr_db import custody, heads

MANIFEST_FORMAT = "appliance-ehr-backup/1"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_path(backup_path: Path) -> Path:
    return Path(backup_path).with_name(Path(backup_path).name + heads.MANIFEST_SUFFIX)


def make_manifest(path: Path, db: Database) -> dict:
    """The manifest of the backup file at ``path`` (``db``: a connection to it)."""
    f = heads.facts(db)
    return {
        "format": MANIFEST_FORMAT, "file": path.name, "written_at": now_iso(),
        "bytes": path.stat().st_size, "sha256": file_sha256(path),
        "page_size": db.execute("PRAGMA page_size").fetchone()[0],
        "pages": db.execute("PRAGMA page_count").fetchone()[0],
        "head": f.head() if f is not None and f.record_id is not None else None,
        "tables": custody.table_digests(db),
    }


def write_private_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_manifest(backup_path: Path) -> tuple[dict | None, str | None]:
    """(manifest, None), (None, None) when there is none, or (None, the problem with it)."""
    path = manifest_path(backup_path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError):
        return None, f"its manifest {path.name} cannot be read"
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT or not isinstance(data.get("tables"), dict):
        return None, f"its manifest {path.name} is not a backup manifest"
    return data, None
