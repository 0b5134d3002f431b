"""Tiny GGUF and image files for the vision tests (headers only: nothing here is a model)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

U32, BOOL, STRING, ARRAY, F32 = 4, 7, 8, 9, 6


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, kvs: list[tuple[str, int, object]], *, version: int = 3) -> Path:
    """A GGUF header with the given (key, type, value) metadata and no tensors. An ARRAY value
    is (item type, list of items)."""
    out = b"GGUF" + struct.pack("<IQQ", version, 0, len(kvs))
    for key, kind, value in kvs:
        out += _string(key) + struct.pack("<I", kind)
        if kind == STRING:
            out += _string(value)
        elif kind == U32:
            out += struct.pack("<I", value)
        elif kind == BOOL:
            out += struct.pack("<?", value)
        elif kind == ARRAY:
            item, items = value
            out += struct.pack("<IQ", item, len(items))
            for x in items:
                out += _string(x) if item == STRING else struct.pack("<f", x)
        else:  # any other type: the raw bytes given
            out += value
    path.write_bytes(out)
    return path


def clip_gguf(path: Path, **extra) -> Path:
    """What a llama.cpp mmproj header looks like (the keys our check reads, and arrays before them)."""
    return write_gguf(path, [
        ("general.type", STRING, "mmproj"),
        ("clip.vision.image_mean", ARRAY, (F32, [0.5, 0.5, 0.5])),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "bc"])),
        ("general.architecture", STRING, extra.pop("arch", "clip")),
        ("clip.has_vision_encoder", BOOL, extra.pop("vision", True)),
        ("clip.projector_type", STRING, "gemma3"),
    ])


def png(width: int = 4, height: int = 3) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk


def jpeg(width: int = 640, height: int = 480) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"
