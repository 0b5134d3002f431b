"""A tiny Gemma 3 vision projector (mmproj GGUF) with random weights, for plumbing tests only.

``write_tiny_projector`` writes a complete GGUF that llama.cpp's multimodal library (mtmd, as
vendored by llama-cpp-python 0.3.36) loads next to the Gemma 3 270M text model: it decodes a
PNG/JPEG, runs the (tiny) SigLIP tower and the Gemma 3 projector, and hands the text model one
embedding of ``n_embd_text`` floats per image token. The weights are seeded random numbers, so
what the text model says about an image is noise: the file proves the code path (projector
check, ``mtmd_init_from_file``, tokenize, image encode, decode after the image), never quality.
The same ``seed`` gives the same bytes.

Shape (chosen to be small and quick on CPU; the file is 860,032 bytes):
- 64x64 input image, 4x4 patches -> 16x16 = 256 patches; 2 encoder layers of width 128
  (2 heads of 64), feed-forward 256, GELU.
- Gemma 3 projector: 4x4 average pooling (llama.cpp's default ``n_merge`` for gemma3) -> 4x4 =
  16 image tokens, RMS norm (``mm.soft_emb_norm``) and a 128 -> ``n_embd_text`` projection
  (``mm.input_projection``). mtmd wraps them in ``<start_of_image>`` ... ``<end_of_image>``.

Metadata (what ``tools/mtmd/clip.cpp`` ``load_hparams`` reads; keys and types as the vendored
``convert_hf_to_gguf.py`` / gguf-py ``GGUFWriter`` write them for Gemma3ForConditionalGeneration):
- ``general.architecture = "clip"`` (``models.projector.verify_projector_file`` requires it) and
  ``general.type = "mmproj"``, ``general.name``, ``general.file_type = 1`` (mostly F16).
- ``clip.has_vision_encoder = True``: without it clip.cpp loads no vision tower.
- ``clip.projector_type = "gemma3"``: selects the SigLIP graph + Gemma 3 pooling/projection and
  mtmd's fixed-size preprocessing and image markers.
- ``clip.vision.image_size`` (64), ``patch_size`` (4), ``embedding_length`` (128),
  ``feed_forward_length`` (256), ``block_count`` (2), ``attention.head_count`` (2),
  ``attention.layer_norm_epsilon`` (1e-6), ``projection_dim`` (= ``n_embd_text``): required u32/f32
  keys (a missing one is a load error).
- ``clip.vision.image_mean`` / ``image_std`` ([0.5]*3 each): required by clip.cpp (3 floats).
- ``clip.use_gelu = True``: SigLIP's FFN activation (else clip.cpp uses quick-GELU).
- ``clip.vision.projector.scale_factor`` is not written: clip.cpp's default 4 for gemma3 is what
  the pooling above assumes (it must divide image_size / patch_size).

Tensors (GGUF/ggml dimension order is the reverse of the numpy shape given here):
- ``v.patch_embd.weight`` (128, 3, 4, 4) F32 and ``v.patch_embd.bias`` (128,) F32: the patch
  convolution; clip.cpp marks the weight optional but the graph needs it.
- ``v.position_embd.weight`` (256, 128) F32: one learned position per patch (its count must be
  (image_size / patch_size)^2).
- per layer i in 0..1, ``v.blk.{i}.``: ``attn_q``, ``attn_k``, ``attn_v``, ``attn_out`` weights
  (128, 128) F16 and biases (128,) F32; ``ln1``/``ln2`` weight and bias (128,) F32; ``ffn_up``
  (SigLIP fc1) weight (256, 128) F16 + bias (256,) F32; ``ffn_down`` (fc2) weight (128, 256) F16 +
  bias (128,) F32. ``attn_out``, ``ffn_up`` and ``ffn_down`` are required. Feed-forward width
  differs from the embedding width on purpose: clip.cpp swaps up/down for gemma3 when
  ``ffn_down``'s first ggml dimension equals the embedding width (legacy conversions).
- ``v.post_ln.weight`` / ``v.post_ln.bias`` (128,) F32: SigLIP's post-layernorm (optional).
- ``mm.soft_emb_norm.weight`` (128,) F32 (required): around 1, as the converter stores it (+1).
- ``mm.input_projection.weight`` (128, n_embd_text) F16 (required): its last numpy dimension
  (ggml ne[0]) is the embedding width mtmd reports and checks against the text model's n_embd
  (a mismatch makes ``mtmd_init_from_file`` fail).

The file is written here with ``struct`` and numpy in GGUF v3 layout (32-byte alignment), so the
fixture needs neither the ``gguf`` package nor the network; its bytes match what gguf-py's
``GGUFWriter`` writes for the same keys and tensors in the same order.

``decodable_png`` makes a small PNG that llama.cpp's image decoder (stb_image) really decodes
(``tests.llm.gguf_helpers.png`` is a header only, which is enough for the size checks but not
for mtmd).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from tests.llm.gguf_helpers import ARRAY, BOOL, F32, STRING, U32, _string

IMAGE_SIZE, PATCH_SIZE = 64, 4
N_EMBD, N_FF, N_HEAD, N_LAYER = 128, 256, 2, 2
EPS = 1e-6
ALIGNMENT = 32
GGML_F32, GGML_F16 = 0, 1
MOSTLY_F16 = 1  # general.file_type, llama_ftype LLAMA_FTYPE_MOSTLY_F16


def _kv(key: str, kind: int, value) -> bytes:
    out = _string(key) + struct.pack("<I", kind)
    if kind == STRING:
        return out + _string(value)
    if kind == U32:
        return out + struct.pack("<I", value)
    if kind == F32:
        return out + struct.pack("<f", value)
    if kind == BOOL:
        return out + struct.pack("<?", value)
    if kind == ARRAY:  # of float32
        return out + struct.pack("<IQ", F32, len(value)) + struct.pack(f"<{len(value)}f", *value)
    raise ValueError(f"unsupported GGUF value type {kind}")


def _pad(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _tensors(n_embd_text: int, seed: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(seed)

    def matrix(rows: int, cols: int) -> np.ndarray:  # a linear weight, stored F16 as in an F16 mmproj
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)

    def vector(n: int, around: float = 0.0, scale: float = 0.02) -> np.ndarray:
        return (around + rng.standard_normal(n) * scale).astype(np.float32)

    n_patches = (IMAGE_SIZE // PATCH_SIZE) ** 2
    out = [
        ("v.patch_embd.weight", (rng.standard_normal((N_EMBD, 3, PATCH_SIZE, PATCH_SIZE)) * 0.02).astype(np.float32)),
        ("v.patch_embd.bias", vector(N_EMBD)),
        ("v.position_embd.weight", (rng.standard_normal((n_patches, N_EMBD)) * 0.02).astype(np.float32)),
    ]
    for i in range(N_LAYER):
        p = f"v.blk.{i}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            out += [(p + name + ".weight", matrix(N_EMBD, N_EMBD)), (p + name + ".bias", vector(N_EMBD))]
        out += [
            (p + "ln1.weight", vector(N_EMBD, 1.0)), (p + "ln1.bias", vector(N_EMBD)),
            (p + "ffn_up.weight", matrix(N_FF, N_EMBD)), (p + "ffn_up.bias", vector(N_FF)),
            (p + "ffn_down.weight", matrix(N_EMBD, N_FF)), (p + "ffn_down.bias", vector(N_EMBD)),
            (p + "ln2.weight", vector(N_EMBD, 1.0)), (p + "ln2.bias", vector(N_EMBD)),
        ]
    out += [
        ("v.post_ln.weight", vector(N_EMBD, 1.0)),
        ("v.post_ln.bias", vector(N_EMBD)),
        ("mm.soft_emb_norm.weight", vector(N_EMBD, 1.0)),
        ("mm.input_projection.weight", matrix(N_EMBD, n_embd_text)),
    ]
    return out


def write_tiny_projector(path: Path, *, n_embd_text: int = 640, seed: int = 0) -> Path:
    """Write the tiny random-weight Gemma 3 mmproj (see the module docstring) to ``path`` and
    return it. ``n_embd_text`` must be the text model's embedding width (640 for Gemma 3 270M)."""
    path = Path(path)
    kvs = [
        ("general.architecture", STRING, "clip"),
        ("general.type", STRING, "mmproj"),
        ("general.name", STRING, "tiny random gemma3 projector (test fixture)"),
        ("general.file_type", U32, MOSTLY_F16),
        ("clip.has_vision_encoder", BOOL, True),
        ("clip.vision.projection_dim", U32, n_embd_text),
        ("clip.vision.image_size", U32, IMAGE_SIZE),
        ("clip.vision.patch_size", U32, PATCH_SIZE),
        ("clip.vision.embedding_length", U32, N_EMBD),
        ("clip.vision.feed_forward_length", U32, N_FF),
        ("clip.vision.block_count", U32, N_LAYER),
        ("clip.vision.attention.head_count", U32, N_HEAD),
        ("clip.vision.image_mean", ARRAY, [0.5, 0.5, 0.5]),
        ("clip.vision.image_std", ARRAY, [0.5, 0.5, 0.5]),
        ("clip.projector_type", STRING, "gemma3"),
        ("clip.vision.attention.layer_norm_epsilon", F32, EPS),
        ("clip.use_gelu", BOOL, True),
    ]
    tensors = _tensors(n_embd_text, seed)

    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    head += b"".join(_kv(*kv) for kv in kvs)
    offset = 0
    for name, array in tensors:
        dims = array.shape[::-1]  # ggml order: ne[0] is the fastest-varying (last numpy) dimension
        kind = GGML_F16 if array.dtype == np.float16 else GGML_F32
        head += _string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, kind, offset)
        offset += _pad(array.nbytes)
    head += b"\x00" * (_pad(len(head)) - len(head))

    with path.open("wb") as fh:
        fh.write(head)
        for _, array in tensors:
            data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
            fh.write(data + b"\x00" * (_pad(len(data)) - len(data)))
    return path


def decodable_png(width: int = 32, height: int = 24, *, seed: int = 0) -> bytes:
    """A complete 8-bit RGB PNG (IHDR, one IDAT, IEND) with seeded random pixels."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + row.tobytes() for row in pixels)  # filter type 0 on every row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
