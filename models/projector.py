"""Checks a vision projector (a profile's mmproj GGUF) before llama.cpp's multimodal library
sees it.

Invariants:
- ``verify_projector_file`` returns only for a file that passes ``verify_model_file``'s checks
  (exists, readable, GGUF magic) and whose metadata says ``general.architecture == "clip"``
  without declaring that it has no vision encoder; otherwise it raises ``ModelFileError``.
  ``mtmd_init_from_file`` may abort inside C on a GGUF that is not a projector, so nothing
  else is ever handed to it.
- The metadata reader is small and bounded: GGUF v2/v3, little-endian, at most ``MAX_KEYS``
  keys, strings and arrays capped; a truncated or absurd header is a ``ModelFileError``.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO, Iterator

from models.errors import ModelFileError
from models.profiles import ModelProfile
from models.verify import GGUF_MAGIC, verify_model_file

MAX_KEYS = 512
MAX_STRING = 1 << 20
MAX_ARRAY = 1 << 24
# GGUF value types: fixed-size scalars by struct format, then STRING (8) and ARRAY (9).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
HINT = "Place the profile's mmproj GGUF (the vision projector that matches the model) in models/."


class _Reader:
    def __init__(self, fh: BinaryIO, path: Path):
        self.fh, self.path = fh, path

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        data = self.fh.read(size)
        if len(data) != size:
            raise ModelFileError(f"truncated GGUF header: {self.path}")
        return struct.unpack(fmt, data)[0]

    def string(self) -> str:
        length = self.take("<Q")
        if length > MAX_STRING:
            raise ModelFileError(f"implausible GGUF string length {length}: {self.path}")
        data = self.fh.read(length)
        if len(data) != length:
            raise ModelFileError(f"truncated GGUF header: {self.path}")
        return data.decode("utf-8", "replace")

    def value(self, kind: int):
        """A scalar or string value; arrays are skipped and reported as None."""
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.take("<I"), self.take("<Q")
            if count > MAX_ARRAY:
                raise ModelFileError(f"implausible GGUF array length {count}: {self.path}")
            if item in _SCALARS:
                self.fh.seek(count * struct.calcsize(_SCALARS[item]), 1)
            elif item == _STRING:
                for _ in range(count):
                    self.string()
            else:  # nested arrays do not occur in the metadata we read
                raise ModelFileError(f"unsupported GGUF array type {item}: {self.path}")
            return None
        raise ModelFileError(f"unknown GGUF value type {kind}: {self.path}")


def gguf_metadata(path: Path) -> Iterator[tuple[str, object]]:
    """(key, value) pairs of a GGUF file's metadata in file order; array values are None.

    A generator, so a caller that has what it needs stops reading there."""
    with path.open("rb") as fh:
        r = _Reader(fh, path)
        if fh.read(4) != GGUF_MAGIC:
            raise ModelFileError(f"not a GGUF file: {path}")
        version = r.take("<I")
        if version not in (2, 3):
            raise ModelFileError(f"unsupported GGUF version {version}: {path}")
        r.take("<Q")  # tensor count
        n_keys = r.take("<Q")
        if n_keys > 1 << 20:
            raise ModelFileError(f"implausible GGUF metadata count {n_keys}: {path}")
        for _ in range(min(n_keys, MAX_KEYS)):
            key = r.string()
            yield key, r.value(r.take("<I"))


def gguf_architecture(path: Path) -> str | None:
    """The file's ``general.architecture``, or None when its metadata has none."""
    for key, value in gguf_metadata(path):
        if key == "general.architecture":
            return value if isinstance(value, str) else None
    return None


def verify_projector_file(path: Path) -> Path:
    """The path of a readable GGUF vision projector, or ``ModelFileError`` saying why not."""
    verify_model_file(path, None, hint=HINT)
    try:
        metadata = {}
        for key, value in gguf_metadata(path):
            metadata[key] = value
            if key == "general.architecture" and value != "clip":
                break
    except OSError as exc:
        raise ModelFileError(f"projector file unreadable: {path} ({exc.strerror}).") from None
    arch = metadata.get("general.architecture")
    if arch != "clip":
        found = f"architecture {arch!r}" if arch else "no architecture"
        raise ModelFileError(f"not a vision projector ({found}, expected 'clip'): {path}. {HINT}")
    if metadata.get("clip.has_vision_encoder") is False:
        raise ModelFileError(f"the projector has no vision encoder: {path}. {HINT}")
    return path


def projector_problem(profile: ModelProfile, models_dir: Path) -> str | None:
    """Why ``profile`` cannot analyse images with the files in ``models_dir``, or None when it can."""
    mmproj = profile.mmproj_path(models_dir)
    if mmproj is None:
        return f"the model profile {profile.name} has no vision projector"
    try:
        verify_projector_file(mmproj)
    except ModelFileError as exc:
        return str(exc)
    return None
