"""Image analysis through llama.cpp's multimodal library (mtmd), for profiles whose vision
projector (mmproj) is in place.

The call mirrors llama-cpp-python's ``Llava15ChatHandler.__call__``: the prompt is rendered
as Gemma turns with mtmd's media marker in the user turn before the question,
``mtmd_tokenize`` splits it into text and image chunks, text chunks go through
``Llama.eval`` and image chunks through ``mtmd_helper_eval_chunk_single``; the findings are
then decoded by the fast ``SchemaDecoder`` on the logits that prefill leaves.

Invariants:
- A projector reaches C only after ``models.projector.verify_projector_file`` has checked in
  Python that it is a GGUF with ``general.architecture == "clip"``: ``mtmd_init_from_file``
  may abort inside C on any other GGUF.
- The mtmd context is created lazily, once per loaded model, and freed with the model (it is
  registered on the ``Llama`` object's exit stack, so it is freed before the model it points
  to). A projector llama.cpp refuses is remembered: vision is then unavailable, with the
  reason, instead of failing again on every image.
- Image bytes are read from disk once, checked (PNG/JPEG signature, file size, pixel size
  from the header) and handed to mtmd from memory; a bad file is an ``ImageFileError`` whose
  message names no path.
- After an image prefill the KV cache holds image embeddings at positions whose ``input_ids``
  say nothing about them, so the caller invalidates the text prefix cache after every image
  call, success or failure.
- Callers hold the model lock around everything that touches llama.cpp here.

No MedGemma projector exists on the development machine: the real round trip (mtmd init,
image encoding, decoding after the image) runs in tests/slow/test_vision_real_model.py with a
tiny random-weight Gemma 3 projector (``tests.llm.tiny_projector``) beside the small model; the
chunk loop's failures are tested against a stand-in for ``mtmd_cpp``.

``ImageFindings.confidence`` is "low" | "moderate" | "high" (docs/design.md §14) rather than a float
0-1: the fast decoder (and a 4B model) handles no numbers, and a word is what a clinician
reads anyway.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from appliance.errors import ApplianceError, GenerationError, ModelFileError
from appliance.llm.fast import Cancelled, DecodeStats, SchemaDecoder
from appliance.llm.grammar import output_schema
from appliance.llm.logs import quiet_mtmd_logs
from appliance.llm.prompt import Message, neutralise, render_gemma
from appliance.llm.token_table import TokenTable

NODE = "IMAGE_ANALYSIS"
TEMPERATURE = 0.3  # docs/design.md §7, INPUT_ASSEMBLY (image)
MAX_TOKENS = 512
MAX_IMAGE_BYTES = 50 << 20  # the terminal's attach limit
MAX_SIDE = 16384
MAX_PIXELS = 64_000_000  # the decoded RGB bitmap stays under ~200 MB
DEFAULT_MARKER = "<__media__>"  # mtmd_default_marker(); the real call asks the library

SYSTEM_PROMPT = """You are a medical imaging assistant. Report only what is visible in the attached image.
- modality: the kind of image (for example chest X-ray, CT, MRI, ultrasound, histopathology, skin photograph, ECG).
- findings: up to six short, specific observations; say that no abnormality is seen when that is what you see.
- confidence: low, moderate or high, for how clearly the image supports the findings.
Do not diagnose beyond what the image shows and do not invent clinical history."""


class VisionError(ApplianceError):
    """An attached image could not be analysed."""


class VisionUnavailable(VisionError):
    """This model has no usable vision projector."""


class ImageFileError(VisionError):
    """The attached file is not a PNG or JPEG image that can be analysed."""


class ImageFindings(BaseModel):
    """Structured findings of one image (docs/design.md §4.1, §6)."""

    model_config = ConfigDict(extra="forbid")

    modality: str = Field(min_length=1, max_length=60)
    findings: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(min_length=1, max_length=6)
    confidence: Literal["low", "moderate", "high"]


def image_messages(question: str, marker: str = DEFAULT_MARKER) -> list[Message]:
    """The image call's turns: the media marker in the user turn, before the question. The
    multimodal tokenizer parses special tokens in the whole prompt, so tag-shaped text in the
    question (a turn marker, another media marker) is neutralised first."""
    question = neutralise(question.strip()) or "Describe this image."
    return [Message("system", SYSTEM_PROMPT), Message("user", f"{marker}\n{question}")]


# -- image files ---------------------------------------------------------------------------
PNG_MAGIC, JPEG_MAGIC = b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"


def image_dimensions(data: bytes) -> tuple[str, int, int] | None:
    """(kind, width, height) from a PNG or JPEG header, or None when it has none."""
    if data.startswith(PNG_MAGIC):
        if data[12:16] != b"IHDR" or len(data) < 24:
            return None
        width, height = struct.unpack(">II", data[16:24])
        return "PNG", width, height
    if data.startswith(JPEG_MAGIC):
        i = 2
        while i + 4 <= len(data):  # walk the segments up to the frame header (SOFn)
            if data[i] != 0xFF:
                return None
            marker = data[i + 1]
            if marker == 0xFF:  # fill byte
                i += 1
                continue
            if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # segments without a length
                i += 2
                continue
            if marker in (0xD9, 0xDA):  # end of image, or scan data before any frame header
                return None
            (length,) = struct.unpack(">H", data[i + 2:i + 4])
            if length < 2:
                return None
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                if i + 9 > len(data):
                    return None
                height, width = struct.unpack(">HH", data[i + 5:i + 9])
                return "JPEG", width, height
            i += 2 + length
    return None


def read_image(path: str | Path) -> bytes:
    """The bytes of a PNG or JPEG within the size limits, or ``ImageFileError`` saying why not."""
    file = Path(path).expanduser()
    try:
        if not file.is_file():
            raise ImageFileError("the attached image file no longer exists")
        with file.open("rb") as fh:
            data = fh.read(MAX_IMAGE_BYTES + 1)
    except OSError as exc:
        raise ImageFileError(f"the attached image cannot be read ({exc.strerror})") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageFileError(f"the attached image is larger than {MAX_IMAGE_BYTES >> 20} MB")
    if not (data.startswith(PNG_MAGIC) or data.startswith(JPEG_MAGIC)):
        raise ImageFileError("the attached file is not a PNG or JPEG image")
    dims = image_dimensions(data)
    if dims is None:
        raise ImageFileError("the attached image is damaged (its header gives no size)")
    kind, width, height = dims
    if width == 0 or height == 0:
        raise ImageFileError(f"the attached {kind} image is empty (0 pixels)")
    if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
        raise ImageFileError(f"the attached {kind} image is too large to analyse ({width}x{height} pixels)")
    return data


# -- the mtmd runtime ------------------------------------------------------------------------
class VisionRuntime:
    """The mtmd context of one loaded ``llama_cpp.Llama``: created on first use, freed with it.

    ``mtmd`` defaults to ``llama_cpp.mtmd_cpp``; tests pass a stand-in."""

    def __init__(self, llm, projector: Path, mtmd=None, lib=None):
        self.llm = llm
        self.projector = projector
        self._mtmd = mtmd
        self._lib = lib
        self.ctx = None
        self.failed: str | None = None  # why llama.cpp refused the projector, once it has

    def _libs(self):
        if self._mtmd is None or self._lib is None:
            import llama_cpp
            import llama_cpp.mtmd_cpp as mtmd

            self._mtmd, self._lib = self._mtmd or mtmd, self._lib or llama_cpp
        return self._mtmd, self._lib

    def _refuse(self, reason: str) -> VisionUnavailable:
        self.failed = reason
        return VisionUnavailable(f"image analysis is unavailable: {reason}")

    def ensure(self) -> None:
        """Create the mtmd context if there is none yet; ``VisionUnavailable`` when it cannot be."""
        if self.ctx is not None:
            return
        if self.failed:
            raise VisionUnavailable(f"image analysis is unavailable: {self.failed}")
        from models.projector import verify_projector_file

        try:
            verify_projector_file(self.projector)  # again: the file may have changed since
        except ModelFileError as exc:
            raise VisionUnavailable(f"image analysis is unavailable: {exc}") from None
        try:
            mtmd, lib = self._libs()
            quiet_mtmd_logs(mtmd)
            params = mtmd.mtmd_context_params_default()
            params.use_gpu = True  # as llama-cpp-python does; a CPU build ignores it
            params.print_timings = False
            params.n_threads = self.llm.n_threads
            params.flash_attn_type = (
                lib.LLAMA_FLASH_ATTN_TYPE_ENABLED
                if self.llm.context_params.flash_attn_type == lib.LLAMA_FLASH_ATTN_TYPE_ENABLED
                else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
            )
            ctx = mtmd.mtmd_init_from_file(str(self.projector).encode(), self.llm.model, params)
        except (OSError, AttributeError) as exc:  # the library missing or not the expected build
            raise self._refuse(f"llama.cpp's multimodal library cannot be used ({exc})") from None
        if not ctx:
            raise self._refuse(f"llama.cpp could not load the vision projector {self.projector} "
                               "(it may not belong to this model)")
        if not mtmd.mtmd_support_vision(ctx):
            mtmd.mtmd_free(ctx)
            raise self._refuse(f"the projector {self.projector} has no vision support")
        self.ctx = ctx
        self.llm._stack.callback(self.close)

    def close(self) -> None:
        if self.ctx is not None:
            mtmd, _ = self._libs()
            mtmd.mtmd_free(self.ctx)
            self.ctx = None

    def prefill(self, prompt: str, image: bytes, *, reserve: int, eval_tokens: Callable[[list[int]], None],
                cancel: threading.Event | None = None) -> int:
        """Evaluate ``prompt`` (one media marker) with ``image`` from an empty KV cache, leaving
        logits for the last position; returns the number of prompt tokens."""
        mtmd, lib = self._libs()
        llm = self.llm
        buf = (ctypes.c_uint8 * len(image)).from_buffer(bytearray(image))
        bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(self.ctx, buf, len(image), False)
        if not bitmap:
            raise ImageFileError("the attached image could not be decoded")
        try:
            text = mtmd.mtmd_input_text()
            encoded = prompt.encode("utf-8")
            text.text, text.text_len = encoded, len(encoded)
            text.add_special, text.parse_special = True, True
            chunks = mtmd.mtmd_input_chunks_init()
            if not chunks:
                raise VisionError("llama.cpp could not allocate the image prompt")
            try:
                bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
                code = mtmd.mtmd_tokenize(self.ctx, chunks, ctypes.byref(text), bitmaps, 1)
                if code != 0:
                    raise VisionError(f"llama.cpp could not tokenize the image prompt (code {code})")
                total = mtmd.mtmd_helper_get_n_tokens(chunks)
                if total + reserve > llm.n_ctx():
                    raise GenerationError(f"an image prompt of {total} tokens and up to {reserve} generated "
                                          f"tokens do not fit the {llm.n_ctx()}-token context")
                llm.reset()
                llm._ctx.kv_cache_clear()
                n_chunks = mtmd.mtmd_input_chunks_size(chunks)
                for i in range(n_chunks):
                    if cancel is not None and cancel.is_set():
                        raise Cancelled()
                    chunk = mtmd.mtmd_input_chunks_get(chunks, i)
                    if not chunk:
                        continue
                    kind = mtmd.mtmd_input_chunk_get_type(chunk)
                    if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                        n_out = ctypes.c_size_t()
                        tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n_out))
                        if tokens and n_out.value > 0:
                            eval_tokens([tokens[j] for j in range(n_out.value)])
                    elif kind in (mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE, mtmd.MTMD_INPUT_CHUNK_TYPE_AUDIO):
                        new_n_past = lib.llama_pos(0)
                        code = mtmd.mtmd_helper_eval_chunk_single(
                            self.ctx, llm._ctx.ctx, chunk, lib.llama_pos(llm.n_tokens), lib.llama_seq_id(0),
                            llm.n_batch,
                            i == n_chunks - 1,  # logits only when nothing follows (Gemma ends on text)
                            ctypes.byref(new_n_past),
                        )
                        if code != 0:
                            raise VisionError(f"llama.cpp could not encode the image (code {code})")
                        llm.n_tokens = new_n_past.value
                return total
            finally:
                mtmd.mtmd_input_chunks_free(chunks)
        finally:
            mtmd.mtmd_bitmap_free(bitmap)

    def analyze(self, backend, table: TokenTable, image: bytes, question: str, *, eval_tokens,
                cancel: threading.Event | None = None) -> tuple[str, int, DecodeStats]:
        """(raw JSON text, prompt tokens, decode stats) of one image; ``SchemaDecoder``'s
        ``BudgetExceeded`` and ``Cancelled`` pass through for the caller to convert."""
        self.ensure()
        mtmd, _ = self._libs()
        marker = mtmd.mtmd_default_marker().decode("utf-8")
        prompt = render_gemma(image_messages(question, marker))
        prompt_tokens = self.prefill(prompt, image, reserve=MAX_TOKENS, eval_tokens=eval_tokens, cancel=cancel)
        dec = SchemaDecoder(backend, table, TEMPERATURE, budget=MAX_TOKENS, cancel=cancel)
        return dec.decode(output_schema(ImageFindings)), prompt_tokens, dec.stats
