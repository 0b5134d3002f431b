"""Model files the operator brings (``appliance model install``): copied into the installed-models
folder, hashed, checked by llama.cpp, and recorded so every start verifies them.

Invariants:
- Nothing is half-installed: the file is copied to ``<name>.partial`` beside its place, hashed
  while it is copied, opened by the caller's ``check`` (llama.cpp: header, metadata and tensor
  bounds, so a truncated or damaged GGUF is refused), and only then renamed into place; the registry
  (``installed.json``) is replaced atomically after the files are in place.
- A file that is not a GGUF, one whose own metadata is not the profile's model (architecture,
  parameter count, name: ``models.gguf_info``; the demo model is never installed under a
  clinical profile), a copy that llama.cpp cannot read, or too little disk space is refused
  with one ``ModelInstallError`` saying which; the folder is left as it was.
- The registry records each profile's file and sha256 (and its projector's); the runtime takes
  the sha256 from it when the profile does not pin one, so the file is verified at every start.
- This layer resolves no location: callers pass the folder (``common.locations``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from models.errors import ModelFileError
from models.gguf_info import ModelIdentityError, check_identity
from models.profiles import ModelProfile
from models.verify import GGUF_MAGIC

REGISTRY = "installed.json"
SPARE_BYTES = 256 << 20  # left free on the disk after an install
CHUNK = 4 << 20

Progress = Callable[[str, int, int], None]  # (file name, bytes copied, bytes in all)


class ModelInstallError(ModelFileError):
    """A model file that cannot be installed, and why."""


@dataclass(frozen=True)
class Installed:
    profile: str
    file: str  # name inside the installed-models folder
    sha256: str
    size: int
    mmproj: str | None
    mmproj_sha256: str | None
    installed: str  # UTC time
    source: str  # the path it was copied from


def read_registry(folder: Path) -> dict[str, Installed]:
    path = folder / REGISTRY
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {name: Installed(**entry) for name, entry in data["profiles"].items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError):
        raise ModelInstallError(f"{path} is not a readable installed-models registry; move it aside and "
                                "install the models again") from None


def installed(profile: str, folder: Path) -> Installed | None:
    """The profile's installed entry, when its file is in place."""
    entry = read_registry(folder).get(profile)
    return entry if entry is not None and (folder / entry.file).is_file() else None


def _check_gguf(path: Path, what: str) -> int:
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
        size = path.stat().st_size
    except FileNotFoundError:
        raise ModelInstallError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise ModelInstallError(f"{what} cannot be read: {path} ({exc.strerror})") from None
    if not path.is_file() or magic != GGUF_MAGIC:
        raise ModelInstallError(f"{what} is not a GGUF file: {path}")
    return size


def _copy(source: Path, target: Path, total: int, done: int, progress: Progress | None) -> tuple[str, int]:
    digest = hashlib.sha256()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with source.open("rb") as src, os.fdopen(fd, "wb") as out:
        while block := src.read(CHUNK):
            digest.update(block)
            out.write(block)
            done += len(block)
            if progress:
                progress(source.name, done, total)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest(), done


def install(source: Path, profile: ModelProfile, folder: Path, *, check: Callable[[Path], None],
            mmproj: Path | None = None, progress: Progress | None = None) -> Installed:
    """Install ``source`` (and a vision projector) as ``profile``'s files in ``folder``.
    ``check(path)`` opens the copied model with the runtime and raises ``ModelInstallError`` when
    it cannot be read (the caller supplies it: this layer does not import llama.cpp)."""
    size = _check_gguf(source, "model file")
    total = size + (_check_gguf(mmproj, "projector file") if mmproj else 0)
    if mmproj and not profile.mmproj_file:
        raise ModelInstallError(f"profile {profile.name} has no vision projector to install")
    try:
        check_identity(source, profile)
    except ModelIdentityError as exc:
        raise ModelInstallError(f"{exc}; nothing was installed") from None
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if total + SPARE_BYTES > free:
        raise ModelInstallError(f"not enough disk space in {folder}: {total / 2**30:.1f} GiB to copy, "
                                f"{free / 2**30:.1f} GiB free")
    registry = read_registry(folder)
    staged: list[tuple[Path, Path]] = []
    try:
        partial = folder / f"{profile.file_name}.partial"
        staged.append((partial, folder / profile.file_name))
        sha, done = _copy(source, partial, total, 0, progress)
        try:
            check_identity(partial, profile)  # the bytes installed, not only the source read before
        except ModelIdentityError as exc:
            raise ModelInstallError(f"{exc}; nothing was installed") from None
        try:
            check(partial)
        except ModelInstallError as exc:
            raise ModelInstallError(f"{source} not installed: {exc} (copy it again from its source)") from None
        mm_sha = None
        if mmproj:
            mm_partial = folder / f"{profile.mmproj_file}.partial"
            staged.append((mm_partial, folder / profile.mmproj_file))
            mm_sha, _ = _copy(mmproj, mm_partial, total, done, progress)
        for partial_path, final in staged:
            os.replace(partial_path, final)
    except BaseException:
        for partial_path, _ in staged:
            partial_path.unlink(missing_ok=True)
        raise
    entry = Installed(profile.name, profile.file_name, sha, size, profile.mmproj_file if mmproj else None, mm_sha,
                      datetime.now(UTC).isoformat(timespec="seconds"), str(source.resolve()))
    registry[profile.name] = entry
    tmp = folder / f"{REGISTRY}.tmp"
    tmp.write_text(json.dumps({"profiles": {k: asdict(v) for k, v in registry.items()}}, indent=2) + "\n",
                   encoding="utf-8")
    os.replace(tmp, folder / REGISTRY)
    return entry
