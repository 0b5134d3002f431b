"""A .zip archive read one member at a time, in memory that does not grow with its size.

The ClinicalTrials.gov bulk download is one zip of about half a million small JSON files.
Python's ``zipfile`` reads the whole central directory into ``ZipInfo`` objects before the
first member can be opened: about 600 bytes per member, some 300 MiB for that download. Here
the central directory is walked entry by entry from its own file handle, and each member is
inflated as it is read.

Invariants:
- Memory holds one directory entry and one member's decompressor at a time, whatever the
  number of members.
- Members come in central-directory order; directory entries are skipped. Stored (0) and
  deflated (8) members are read; any other method, or an encrypted member, raises
  ``ValueError`` when the member is first read (so an importer can skip that member alone).
- ZIP64 archives (more than 65,535 members, or larger than 4 GiB) are read.
- A member read to its end has its size and CRC-32 checked; a mismatch raises ``ValueError``.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_CENTRAL_FIXED = struct.Struct("<4s6H3I5H2I")  # 46 bytes
_LOCAL_FIXED = 30
_MAX_COMMENT = 0xFFFF
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Member:
    name: str
    method: int
    flags: int
    compressed_size: int
    size: int
    crc: int
    header_offset: int

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")


def _directory(f: IO[bytes]) -> tuple[int, int]:
    """(number of entries, offset of the central directory), from the end records."""
    f.seek(0, io.SEEK_END)
    size = f.tell()
    tail_len = min(size, _MAX_COMMENT + 22)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < 22:
        raise ValueError("not a zip archive (no end of central directory record)")
    _sig, _disk, _cd_disk, _n_disk, count, cd_size, cd_offset, _comment = struct.unpack("<4s4H2IH", tail[at:at + 22])
    if count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        locator_at = size - tail_len + at - 20
        if locator_at < 0:
            raise ValueError("zip64 archive without its locator")
        f.seek(locator_at)
        sig, _disk, eocd64_at, _disks = struct.unpack("<4sIQI", f.read(20))
        if sig != _ZIP64_LOCATOR:
            raise ValueError("zip64 archive without its locator")
        f.seek(eocd64_at)
        record = f.read(56)
        if len(record) < 56 or record[:4] != _ZIP64_EOCD:
            raise ValueError("zip64 end of central directory record is missing")
        count, cd_size, cd_offset = struct.unpack("<3Q", record[32:56])
    return count, cd_offset


def _zip64(extra: bytes, size: int, compressed: int, offset: int) -> tuple[int, int, int]:
    """Sizes and offset from the ZIP64 extra field, for those the fixed fields mark 0xFFFFFFFF."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack("<HH", extra[pos:pos + 4])
        body = extra[pos + 4:pos + 4 + length]
        if tag == 0x0001:
            values = list(struct.unpack(f"<{len(body) // 8}Q", body[:len(body) // 8 * 8]))
            if size == 0xFFFFFFFF and values:
                size = values.pop(0)
            if compressed == 0xFFFFFFFF and values:
                compressed = values.pop(0)
            if offset == 0xFFFFFFFF and values:
                offset = values.pop(0)
            break
        pos += 4 + length
    return size, compressed, offset


def count_members(path: Path | str) -> int:
    """Entries in the archive's central directory (directories included)."""
    with open(path, "rb") as f:
        return _directory(f)[0]


def iter_members(path: Path | str) -> Iterator[Member]:
    """Every file member, in central-directory order, reading one directory entry at a time."""
    with open(path, "rb") as raw:
        count, offset = _directory(raw)
        raw.seek(offset)
        directory = io.BufferedReader(raw, buffer_size=_CHUNK)  # type: ignore[arg-type]
        for _ in range(count):
            fixed = directory.read(_CENTRAL_FIXED.size)
            if len(fixed) < _CENTRAL_FIXED.size or fixed[:4] != _CENTRAL:
                raise ValueError("damaged zip central directory")
            (_sig, _made, _need, flags, method, _time, _date, crc, compressed, size,
             name_len, extra_len, comment_len, _disk, _internal, _external, header_offset) = _CENTRAL_FIXED.unpack(fixed)
            name_bytes = directory.read(name_len)
            extra = directory.read(extra_len)
            directory.read(comment_len)
            size, compressed, header_offset = _zip64(extra, size, compressed, header_offset)
            name = name_bytes.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
            member = Member(name, method, flags, compressed, size, crc, header_offset)
            if not member.is_dir:
                yield member


class _MemberReader(io.RawIOBase):
    """The bytes of one member, inflated as they are read; checked at the end."""

    def __init__(self, f: IO[bytes], member: Member):
        self._f, self._m = f, member
        self._left = None  # compressed bytes still to read, once the local header is read
        self._inflate = None
        self._crc = 0
        self._out = 0
        self._pending = b""
        self._done = False  # the compressed data is used up (and checked)

    def readable(self) -> bool:
        return True

    def _start(self) -> None:
        m = self._m
        if m.flags & 0x1:
            raise ValueError(f"{m.name}: encrypted members are not supported")
        if m.method not in (0, 8):
            raise ValueError(f"{m.name}: compression method {m.method} is not supported")
        self._f.seek(m.header_offset)
        local = self._f.read(_LOCAL_FIXED)
        if len(local) < _LOCAL_FIXED or local[:4] != _LOCAL:
            raise ValueError(f"{m.name}: damaged local header")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        self._f.seek(m.header_offset + _LOCAL_FIXED + name_len + extra_len)
        self._left = m.compressed_size
        self._inflate = zlib.decompressobj(-15) if m.method == 8 else None

    def readinto(self, buffer) -> int:
        if self._left is None:
            self._start()
        while not self._pending and not self._done:
            chunk = self._f.read(min(_CHUNK, self._left)) if self._left else b""
            self._left -= len(chunk)
            if chunk:
                try:
                    data = self._inflate.decompress(chunk) if self._inflate is not None else chunk
                except zlib.error as exc:
                    raise ValueError(f"{self._m.name}: compressed data is damaged ({exc})") from None
            else:
                data = self._end()
            self._crc = zlib.crc32(data, self._crc)
            self._out += len(data)
            if self._done:
                self._check()
            self._pending = data
        if not self._pending:
            return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _end(self) -> bytes:
        """The member's last bytes, once its compressed data is used up."""
        if self._left:
            raise ValueError(f"{self._m.name}: the archive ends inside the member")
        self._done = True
        if self._inflate is None:
            return b""
        tail = self._inflate.flush()
        if not self._inflate.eof:
            raise ValueError(f"{self._m.name}: compressed data is truncated")
        return tail

    def _check(self) -> None:
        m = self._m
        if self._out != m.size or (self._crc & 0xFFFFFFFF) != m.crc:
            raise ValueError(f"{m.name}: size or CRC-32 does not match the archive's record (damaged member)")


def open_member(f: IO[bytes], member: Member) -> IO[bytes]:
    """A buffered binary stream of ``member``'s content from the archive opened as ``f``.

    The size and CRC are checked when the stream reaches its end (``ValueError``)."""
    return io.BufferedReader(_MemberReader(f, member), buffer_size=_CHUNK)


__all__ = ["Member", "count_members", "iter_members", "open_member"]
