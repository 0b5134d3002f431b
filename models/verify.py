"""Checks a model file before llama.cpp sees it.

Invariants:
- ``verify_model_file`` either returns the path of a readable GGUF whose sha256 matches (when
  one is known) or raises ``ModelFileError`` with a message that names the expected path and
  what to do. llama.cpp is never handed a file that failed these checks.
- A file is hashed again unless a marker beside it records the same sha256 for the same file
  as it is now: device, inode, size, modification and status-change times. ``os.utime`` can
  set the modification time back, but any write or ``utime`` moves the status-change time
  (ctime), which no unprivileged call can set, so a changed file is always hashed again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from models.errors import ModelFileError

GGUF_MAGIC = b"GGUF"
_CHECKED_SUFFIX = ".sha256-ok"


# Called while a file is hashed with (bytes hashed so far, total bytes), after every chunk.
HashProgress = Callable[[int, int], None]


def sha256_of(path: Path, chunk: int = 1 << 20, progress: HashProgress | None = None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size if progress is not None else 0
    done = 0
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
            if progress is not None:
                done += len(block)
                progress(done, total)
    return digest.hexdigest()


def verify_model_file(path: Path, sha256: str | None, *, hint: str = "",
                      progress: HashProgress | None = None) -> Path:
    """Existence, GGUF magic, then sha256 (cached beside the file: see the module docstring).

    ``progress``, if given, is called during the sha256 (only when the file is hashed)."""
    help_text = f" {hint}" if hint else ""
    if not path.exists():
        raise ModelFileError(f"model file not found: {path}.{help_text}")
    if not path.is_file():
        raise ModelFileError(f"model path is not a file: {path}.{help_text}")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ModelFileError(f"model file unreadable: {path} ({exc.strerror}).{help_text}") from None
    if magic != GGUF_MAGIC:
        raise ModelFileError(f"not a GGUF file (bad magic {magic!r}): {path}.{help_text}")
    if sha256:
        if not _cached_ok(path, sha256):
            before = _stamp(path)
            actual = sha256_of(path, progress=progress)
            if actual != sha256.lower():
                raise ModelFileError(
                    f"model file checksum mismatch: {path} has sha256 {actual[:16]}..., "
                    f"expected {sha256[:16]}...; the file is corrupt or a different build.{help_text}"
                )
            if _stamp(path) == before:  # not changed while it was hashed
                _remember_ok(path, sha256)
    return path


def _stamp(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino,
            "device": st.st_dev}


def _marker(path: Path) -> Path:
    return path.with_name(path.name + _CHECKED_SUFFIX)


def _cached_ok(path: Path, sha256: str) -> bool:
    marker = _marker(path)
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return data == {"sha256": sha256.lower(), **_stamp(path)}


def _remember_ok(path: Path, sha256: str) -> None:
    try:
        _marker(path).write_text(json.dumps({"sha256": sha256.lower(), **_stamp(path)}))
    except OSError:
        pass  # a read-only models/ folder only costs a re-hash next time
