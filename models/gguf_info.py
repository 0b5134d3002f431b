"""What a GGUF file says about itself: its metadata (``gguf_metadata``), its architecture, name
and parameter count (``read_info``: the metadata and the tensor table; no tensor data is read),
and whether that is the model a profile is for. The one GGUF reader of the appliance: the
vision projector's check (``models.projector``) reads through it too.

Invariants:
- Only the header is read, as the GGUF format (version 2 and 3) lays it out; a header that ends
  early or does not parse is ``ModelIdentityError``, never another exception (``read_info`` also
  turns an unreadable file into one; ``gguf_metadata`` lets ``OSError`` through).
- The parameter count is the sum of the tensor table's element counts, so it cannot be
  claimed by a metadata field.
- ``check_identity`` refuses a file whose architecture, parameter count or name is not the
  profile's (``ModelProfile.architecture``, ``parameters``, ``name_words``), so a demo model
  can never be installed or served as a clinical one; a profile that states none of them
  accepts any GGUF.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from models.errors import ModelFileError
from models.profiles import ModelProfile
from models.verify import GGUF_MAGIC

MAX_STRING = 1 << 24  # a header string longer than 16 MiB is damage, not metadata
MAX_COUNT = 1 << 32
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class ModelIdentityError(ModelFileError):
    """A GGUF whose own metadata is not the profile's model, or whose header cannot be read."""


@dataclass(frozen=True)
class GgufInfo:
    architecture: str | None
    name: str | None  # general.name
    basename: str | None  # general.basename
    size_label: str | None  # general.size_label, e.g. "4B"
    parameters: int  # from the tensor table

    def describe(self) -> str:
        who = self.name or self.basename or "an unnamed model"
        return f"'{who}' ({self.architecture or 'no architecture'}, {_count(self.parameters)} parameters)"


def _count(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


class _Reader:
    def __init__(self, fh):
        self.fh = fh

    def take(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise ModelIdentityError("the GGUF header ends early")
        return data

    def scalar(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def count(self) -> int:
        n = self.scalar("Q")
        if n > MAX_COUNT:
            raise ModelIdentityError("the GGUF header is damaged (an impossible count)")
        return n

    def string(self) -> str:
        n = self.scalar("Q")
        if n > MAX_STRING:
            raise ModelIdentityError("the GGUF header is damaged (an impossible string length)")
        return self.take(n).decode("utf-8", "replace")

    def skip_string(self) -> None:
        n = self.scalar("Q")
        if n > MAX_STRING:
            raise ModelIdentityError("the GGUF header is damaged (an impossible string length)")
        self.fh.seek(n, 1)

    def value(self, kind: int):
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner, n = self.scalar("I"), self.count()
            if inner in _SCALARS:
                self.fh.seek(struct.calcsize(_SCALARS[inner]) * n, 1)
            elif inner == _STRING:
                for _ in range(n):
                    self.skip_string()
            else:
                for _ in range(n):
                    self.value(inner)
            return None  # arrays (the vocabulary) are not needed here
        raise ModelIdentityError(f"the GGUF header is damaged (unknown value type {kind})")


def _start(r: _Reader, path: Path) -> tuple[int, int]:
    """Check the magic and the version; (tensor count, metadata key count)."""
    if r.take(4) != GGUF_MAGIC:
        raise ModelIdentityError(f"{path} is not a GGUF file")
    if r.scalar("I") not in (2, 3):
        raise ModelIdentityError(f"{path} is a GGUF version this appliance cannot read")
    return r.count(), r.count()


def _metadata(r: _Reader, keys: int) -> Iterator[tuple[str, object]]:
    for _ in range(keys):
        key = r.string()
        yield key, r.value(r.scalar("I"))


def gguf_metadata(path: Path) -> Iterator[tuple[str, object]]:
    """(key, value) pairs of a GGUF file's metadata in file order; array values are None.

    A generator, so a caller that has what it needs stops reading there."""
    with path.open("rb", buffering=1 << 20) as fh:
        r = _Reader(fh)
        _tensors, keys = _start(r, path)
        yield from _metadata(r, keys)


def read_info(path: Path) -> GgufInfo:
    """The file's architecture, names and parameter count, from its header."""
    try:
        with path.open("rb", buffering=1 << 20) as fh:
            r = _Reader(fh)
            tensors, keys = _start(r, path)
            meta = dict(_metadata(r, keys))
            parameters = 0
            for _ in range(tensors):
                r.skip_string()
                dims = r.scalar("I")
                if dims > 8:
                    raise ModelIdentityError("the GGUF header is damaged (a tensor of more than 8 dimensions)")
                n = 1
                for _ in range(dims):
                    n *= r.scalar("Q")
                r.take(12)  # type (uint32), offset (uint64)
                parameters += n
    except OSError as exc:
        raise ModelIdentityError(f"{path} cannot be read ({exc.strerror or exc})") from None

    def text(key: str) -> str | None:
        value = meta.get(key)
        return value if isinstance(value, str) and value.strip() else None

    return GgufInfo(text("general.architecture"), text("general.name"), text("general.basename"),
                    text("general.size_label"), parameters)


def _folded(text: str | None) -> str:
    return re.sub(r"[^a-z0-9]", "", (text or "").lower())


def identity_problem(info: GgufInfo, profile: ModelProfile) -> str | None:
    """Why ``info`` is not ``profile``'s model, or None."""
    wanted = []
    if profile.architecture:
        wanted.append(profile.architecture)
    if profile.parameters:
        low, high = profile.parameters
        wanted.append(f"{_count(low)}-{_count(high)} parameters")
    if profile.name_words:
        wanted.append("named " + " and ".join(repr(w) for w in profile.name_words))
    names = _folded(info.name) + " " + _folded(info.basename)
    wrong = (
        (profile.architecture and info.architecture != profile.architecture)
        or (profile.parameters and not profile.parameters[0] <= info.parameters <= profile.parameters[1])
        or any(_folded(w) not in names for w in profile.name_words)
    )
    if not wrong:
        return None
    return (f"this file is not a {profile.name} model: its own metadata says {info.describe()}, "
            f"and {profile.name} is {', '.join(wanted)}")


def check_identity(path: Path, profile: ModelProfile) -> GgufInfo:
    """``read_info``, refused with ``ModelIdentityError`` when it is not ``profile``'s model."""
    info = read_info(path)
    problem = identity_problem(info, profile)
    if problem:
        raise ModelIdentityError(f"{path}: {problem}")
    return info
