"""Reading the knowledge importers' inputs: files, folders, zip and gzip members, and JSON
arrays one element at a time (``mcp_servers.knowledge.importers.driver``).

Invariants:
- Memory stays bounded whatever the file size: JSON arrays ("results", "studies") are decoded
  one element at a time and zip archives are read one member at a time (``zip_stream``).
- ``checked_sources`` turns a source that cannot be opened or listed into ``ImportSourceError``
  naming it; ``UNREADABLE`` and ``why`` are what the importer turns into the same error for a
  file that stops part way (the importer rolls the whole run back).
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mcp_servers import zip_stream
from mcp_servers.knowledge.store import KnowledgeError


class ImportSourceError(KnowledgeError):
    """The import source is missing, cannot be read in full, or is not in the expected format."""


@dataclass
class ReadPosition:
    """How far an import has read its input, in bytes of the files on disk (a progress bar's
    measure: a zip member's place in its archive, a plain or gzip file's read offset)."""

    total: int = 0
    finished: int = 0  # bytes of the files read to their end
    current: Callable[[], int] = lambda: 0  # bytes read of the file being read

    @property
    def done(self) -> int:
        return min(self.total, self.finished + self.current())


def iter_sources(path: Path, suffixes: tuple[str, ...],
                 position: ReadPosition | None = None) -> Iterator[tuple[str, IO[bytes]]]:
    """Yield (name, binary stream) for every matching file, zip member or gzip file under path.

    Zip archives are read member by member in archive order (``zip_stream``), so a download of
    half a million files costs no more memory than one of ten. ``position`` follows the reading."""
    path = Path(path)
    if not path.exists():
        raise ImportSourceError(f"{path} does not exist")
    wanted = suffixes + tuple(s + ".gz" for s in suffixes) + (".zip",)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith(wanted))
    position = position or ReadPosition()
    position.total = sum(f.stat().st_size for f in files)
    for file in files:
        lower = file.name.lower()
        with open(file, "rb") as raw:
            if lower.endswith(".zip"):
                for member in zip_stream.iter_members(file):
                    if member.name.lower().endswith(suffixes):
                        position.current = lambda at=member.header_offset: at
                        with zip_stream.open_member(raw, member) as handle:
                            yield f"{file.name}:{member.name}", handle
            elif lower.endswith(".gz"):
                position.current = raw.tell
                with gzip.GzipFile(fileobj=raw, mode="rb") as handle:
                    yield file.name, handle
            else:
                position.current = raw.tell
                yield file.name, raw
        position.finished += file.stat().st_size
        position.current = lambda: 0


class _JsonStream:
    """Incremental reader: decodes one JSON value at a time from a large text stream."""

    CHUNK = 1 << 20

    def __init__(self, binary: IO[bytes]):
        self._text = io.TextIOWrapper(binary, encoding="utf-8-sig")
        self._decoder = json.JSONDecoder()
        self._buf = ""
        self._pos = 0
        self._eof = False

    def _fill(self) -> bool:
        data = self._text.read(self.CHUNK)
        self._buf = self._buf[self._pos:] + data
        self._pos = 0
        self._eof = not data
        return bool(data)

    def peek(self) -> str | None:
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in " \t\r\n":
                self._pos += 1
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill():
                return None

    def take(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} in JSON")
        self._pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError:
                if self._eof or not self._fill():
                    raise
                continue
            if end == len(self._buf) and not self._eof and self._fill():
                continue  # a number may continue in the next chunk: decode again
            self._pos = end
            return value

    def array_items(self) -> Iterator[Any]:
        self.take("[")
        if self.peek() == "]":
            self._pos += 1
            return
        while True:
            yield self.value()
            if self.peek() == ",":
                self._pos += 1
                continue
            self.take("]")
            return


def iter_json_records(binary: IO[bytes], array_key: str) -> Iterator[dict]:
    """Records from ``[...]``, ``{..., array_key: [...]}`` (streamed) or a single object."""
    stream = _JsonStream(binary)
    first = stream.peek()
    if first == "[":
        yield from stream.array_items()
        return
    stream.take("{")
    single: dict = {}
    found = False
    while stream.peek() != "}":
        key = stream.value()
        stream.take(":")
        if key == array_key and stream.peek() == "[":
            found = True
            yield from stream.array_items()
        else:
            single[key] = stream.value()
        if stream.peek() == ",":
            stream.take(",")
    if not found:
        yield single


UNREADABLE = (ValueError, SyntaxError, UnicodeDecodeError, EOFError, OSError, zlib.error)


def why(exc: BaseException) -> str:
    """Why a file could not be read in full, in a few words."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON at line {exc.lineno}: truncated or damaged"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, SyntaxError):  # xml.etree's ParseError
        return "not well-formed XML: truncated or damaged"
    if isinstance(exc, OSError):
        return exc.strerror or f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {exc}"


def checked_sources(path: Path, suffixes: tuple[str, ...],
                    position: ReadPosition) -> Iterator[tuple[str, IO[bytes]]]:
    """``iter_sources``, with a source that cannot be opened or listed (a damaged zip, a file
    without read permission) as ``ImportSourceError`` naming it."""
    sources = iter_sources(path, suffixes, position)
    while True:
        try:
            item = next(sources)
        except StopIteration:
            return
        except ImportSourceError:
            raise
        except UNREADABLE as exc:
            raise ImportSourceError(f"{Path(path).name} cannot be read in full ({why(exc)}); nothing was "
                                    "imported") from None
        yield item
