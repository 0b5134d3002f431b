"""Vision without a projector file: the GGUF architecture check, image-file validation,
``vision_available`` per profile, the mtmd chunk loop against a stand-in for
``llama_cpp.mtmd_cpp``, and the prefix-cache invalidation after an image call.

The real projector round trip cannot run here: this machine has no mmproj file."""

from __future__ import annotations

import contextlib
import ctypes
import threading
from types import SimpleNamespace

import llama_cpp
import llama_cpp.mtmd_cpp as real_mtmd
import pytest

from appliance.errors import (
    GenerationCancelled,
    GenerationError,
    GenerationTruncated,
    ModelFileError,
)
from appliance.llm import vision
from appliance.llm.base import VisionModel
from appliance.llm.fast import BudgetExceeded, DecodeStats, fast_handles
from appliance.llm.grammar import output_schema
from appliance.llm.llama import LlamaModel
from appliance.llm.threads import ThreadGovernor
from appliance.llm.vision import (
    ImageFileError,
    ImageFindings,
    VisionRuntime,
    VisionUnavailable,
    read_image,
)
from models import projector
from models.gguf_info import gguf_metadata
from models.profiles import get_profile
from tests.llm.gguf_helpers import ARRAY, STRING, U32, clip_gguf, jpeg, png, write_gguf

pytestmark = pytest.mark.timeout(30)
FINDINGS = '{"modality":"chest X-ray","findings":["No focal consolidation."],"confidence":"moderate"}'


@pytest.fixture
def models_dir(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    return folder


# -- the GGUF check -----------------------------------------------------------------------
def test_a_clip_gguf_is_a_projector(tmp_path):
    path = clip_gguf(tmp_path / "mmproj.gguf")
    assert dict(gguf_metadata(path))["general.architecture"] == "clip"
    assert projector.verify_projector_file(path) == path


@pytest.mark.parametrize("make, message", [
    (lambda p: clip_gguf(p, arch="gemma3"), "not a vision projector (architecture 'gemma3'"),
    (lambda p: write_gguf(p, [("general.name", STRING, "x"), ("n", U32, 3)]), "no architecture"),
    (lambda p: clip_gguf(p, vision=False), "no vision encoder"),
    (lambda p: p.write_bytes(b"PK\x03\x04 not a gguf"), "not a GGUF file"),
    (lambda p: p.write_bytes(clip_gguf(p).read_bytes()[:40]), "the GGUF header ends early"),
    (lambda p: write_gguf(p, [("general.architecture", STRING, "clip")], version=1), "a GGUF version this appliance cannot read"),
    (lambda p: write_gguf(p, [("general.architecture", 42, b"")]), "unknown value type 42"),
    (lambda p: None, "not found"),
])
def test_anything_else_is_refused_with_a_reason(tmp_path, make, message):
    path = tmp_path / "mmproj.gguf"
    make(path)
    with pytest.raises(ModelFileError) as info:
        projector.verify_projector_file(path)
    assert message in str(info.value)


def test_arrays_are_skipped_and_a_huge_array_is_refused(tmp_path):
    path = write_gguf(tmp_path / "a.gguf", [("xs", ARRAY, (STRING, ["p", "q"])), ("general.architecture", STRING, "clip")])
    assert dict(gguf_metadata(path)) == {"xs": None, "general.architecture": "clip"}
    data = bytearray(path.read_bytes())
    count_at = 24 + 8 + len("xs") + 4 + 4  # header, key, value type, item type
    data[count_at:count_at + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="an impossible count"):
        list(gguf_metadata(path))


# -- vision_available per profile --------------------------------------------------------
def shell(profile_name: str, models_dir) -> LlamaModel:
    """A LlamaModel without llama.cpp behind it: enough for the vision checks."""
    model = LlamaModel.__new__(LlamaModel)
    model.profile, model.models_dir, model._vision = get_profile(profile_name), models_dir, None
    return model


def test_the_default_profile_has_no_vision(models_dir):
    clip_gguf(models_dir / "mmproj-medgemma-1.5-4b-it-F16.gguf")  # even with another profile's file present
    model = shell("gemma3-270m", models_dir)
    assert isinstance(model, VisionModel)  # the capability is typed; availability is per profile
    assert model.vision_available is False
    assert "has no vision projector" in model.vision_problem
    with pytest.raises(VisionUnavailable, match="has no vision projector"):
        model.analyze_image("x.png", "What do you see?")


def test_the_production_profile_has_vision_only_with_a_real_projector_in_place(models_dir):
    model = shell("medgemma-1.5-4b-it", models_dir)
    path = models_dir / "mmproj-medgemma-1.5-4b-it-F16.gguf"
    assert not model.vision_available and "not found" in model.vision_problem
    path.write_bytes(b"not a gguf at all")
    assert not model.vision_available and "not a GGUF file" in model.vision_problem
    write_gguf(path, [("general.architecture", STRING, "gemma3")])  # a text model renamed
    assert not model.vision_available and "not a vision projector" in model.vision_problem
    clip_gguf(path)
    assert model.vision_available and model.vision_problem is None
    model._vision = SimpleNamespace(failed="llama.cpp could not load the vision projector")
    assert not model.vision_available  # a projector llama.cpp refused stays refused


# -- image files ---------------------------------------------------------------------------
def test_png_and_jpeg_are_read(tmp_path):
    for name, data, dims in (("a.png", png(40, 30), ("PNG", 40, 30)), ("b.jpg", jpeg(640, 480), ("JPEG", 640, 480))):
        path = tmp_path / name
        path.write_bytes(data)
        assert read_image(path) == data
        assert vision.image_dimensions(data) == dims


@pytest.mark.parametrize("data, message", [
    (b"GIF89a" + b"\x00" * 20, "not a PNG or JPEG"),
    (b"", "not a PNG or JPEG"),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 32, "damaged"),
    (b"\xff\xd8\xff\xda\x00\x02", "damaged"),
    (png(0, 10), "empty"),
    (png(20000, 20), "too large to analyse (20000x20"),
    (jpeg(9000, 9000), "too large to analyse"),
])
def test_bad_image_files_are_clear_errors(tmp_path, data, message):
    path = tmp_path / "image"
    path.write_bytes(data)
    with pytest.raises(ImageFileError) as info:
        read_image(path)
    assert message in str(info.value) and str(tmp_path) not in str(info.value)


def test_missing_oversized_and_unreadable_files(tmp_path, monkeypatch):
    with pytest.raises(ImageFileError, match="no longer exists"):
        read_image(tmp_path / "gone.png")
    monkeypatch.setattr(vision, "MAX_IMAGE_BYTES", 10)
    (tmp_path / "big.png").write_bytes(png())
    with pytest.raises(ImageFileError, match="larger than"):
        read_image(tmp_path / "big.png")


def test_the_findings_schema_suits_both_decoders():
    schema = output_schema(ImageFindings).json_schema
    assert fast_handles(ImageFindings) and output_schema(ImageFindings).grammar
    assert list(schema["properties"]) == ["modality", "findings", "confidence"]
    assert schema["properties"]["findings"]["maxItems"] == 6
    assert vision.TEMPERATURE == 0.3 and vision.MAX_TOKENS == 512


def test_the_marker_goes_in_the_user_turn_before_the_question():
    user = vision.image_messages("What do you see?", real_mtmd.mtmd_default_marker().decode())[-1]
    assert user.role == "user" and user.content == "<__media__>\nWhat do you see?"


# -- the mtmd chunk loop, against a stand-in -------------------------------------------------
class FakeMtmd:
    """Records calls the way llama_cpp.mtmd_cpp would receive them."""

    MTMD_INPUT_CHUNK_TYPE_TEXT, MTMD_INPUT_CHUNK_TYPE_IMAGE, MTMD_INPUT_CHUNK_TYPE_AUDIO = 0, 1, 2
    mtmd_bitmap_p_ctypes = ctypes.c_void_p
    mtmd_input_text = real_mtmd.mtmd_input_text

    def __init__(self, chunks=((0, [1, 2, 3]), (1, 256), (0, [4, 5])), init_ok=True, bitmap_ok=True):
        self.chunks, self.init_ok, self.bitmap_ok = list(chunks), init_ok, bitmap_ok
        self.calls: list[tuple] = []

    def __getattr__(self, name):  # the functions we do not model just record themselves
        return lambda *a: self.calls.append((name,) + a)

    def mtmd_default_marker(self):
        return b"<__media__>"

    def mtmd_context_params_default(self):
        return SimpleNamespace()

    def mtmd_init_from_file(self, path, model, params):
        self.calls.append(("init", path))
        return 7 if self.init_ok else None

    def mtmd_support_vision(self, ctx):
        return True

    def mtmd_helper_bitmap_init_from_buf(self, ctx, buf, n, placeholder):
        self.calls.append(("bitmap", n))
        return 11 if self.bitmap_ok else None

    def mtmd_input_chunks_init(self):
        return 13

    def mtmd_tokenize(self, ctx, chunks, text, bitmaps, n):
        self.calls.append(("tokenize", text._obj.text.decode(), n))
        return 0

    def mtmd_helper_get_n_tokens(self, chunks):
        return sum(len(c) if isinstance(c, list) else c for _, c in self.chunks)

    def mtmd_input_chunks_size(self, chunks):
        return len(self.chunks)

    def mtmd_input_chunks_get(self, chunks, i):
        return 100 + i

    def mtmd_input_chunk_get_type(self, chunk):
        return self.chunks[chunk - 100][0]

    def mtmd_input_chunk_get_tokens_text(self, chunk, n_out):
        tokens = self.chunks[chunk - 100][1]
        n_out._obj.value = len(tokens)
        return (ctypes.c_int32 * len(tokens))(*tokens)

    def mtmd_helper_eval_chunk_single(self, ctx, lctx, chunk, n_past, seq, n_batch, logits_last, new_n_past):
        self.calls.append(("eval_image", n_past.value, logits_last))
        new_n_past._obj.value = n_past.value + self.chunks[chunk - 100][1]
        return 0


class FakeLlama:
    def __init__(self, n_ctx=8192):
        self._n_ctx, self.n_tokens, self.n_batch, self.n_threads, self.model = n_ctx, 5, 512, 2, 99
        self.context_params = SimpleNamespace(flash_attn_type=0)
        self._stack = contextlib.ExitStack()
        self.cleared = 0
        self._ctx = SimpleNamespace(ctx=42, kv_cache_clear=lambda: setattr(self, "cleared", self.cleared + 1))
        self.evals: list[list[int]] = []

    def n_ctx(self):
        return self._n_ctx

    def reset(self):
        self.n_tokens = 0

    def eval(self, tokens):
        self.evals.append(list(tokens))
        self.n_tokens += len(tokens)


def runtime(tmp_path, mtmd=None, llm=None):
    return VisionRuntime(llm or FakeLlama(), clip_gguf(tmp_path / "mmproj.gguf"), mtmd or FakeMtmd(), llama_cpp)


def test_a_non_projector_never_reaches_mtmd_init(tmp_path):
    rt = runtime(tmp_path)
    write_gguf(rt.projector, [("general.architecture", STRING, "gemma3")])
    with pytest.raises(VisionUnavailable, match="not a vision projector"):
        rt.ensure()
    assert not any(c[0] == "init" for c in rt._mtmd.calls)


def test_a_refused_projector_is_a_clear_error_remembered(tmp_path):
    rt = runtime(tmp_path, FakeMtmd(init_ok=False))
    with pytest.raises(VisionUnavailable, match="could not load the vision projector"):
        rt.ensure()
    with pytest.raises(VisionUnavailable):
        rt.ensure()
    assert [c[0] for c in rt._mtmd.calls].count("init") == 1 and rt.failed


def test_the_context_is_created_once_and_freed_with_the_model(tmp_path):
    rt = runtime(tmp_path)
    rt.ensure()
    rt.ensure()
    assert [c[0] for c in rt._mtmd.calls].count("init") == 1 and rt.ctx == 7
    rt.llm._stack.close()
    assert ("mtmd_free", 7) in rt._mtmd.calls and rt.ctx is None


def test_prefill_evaluates_text_and_image_chunks_in_order(tmp_path):
    rt = runtime(tmp_path)
    rt.ensure()
    total = rt.prefill("<__media__>\nq", png(), reserve=512, eval_tokens=rt.llm.eval)
    assert total == 3 + 256 + 2
    assert rt.llm.evals == [[1, 2, 3], [4, 5]]
    assert ("eval_image", 3, False) in rt._mtmd.calls  # logits come from the text after it
    assert rt.llm.n_tokens == 261 and rt.llm.cleared == 1
    names = [c[0] for c in rt._mtmd.calls]
    assert ("tokenize", "<__media__>\nq", 1) in rt._mtmd.calls
    assert "mtmd_input_chunks_free" in names and "mtmd_bitmap_free" in names


def test_prefill_failures_free_what_they_took(tmp_path):
    rt = runtime(tmp_path, llm=FakeLlama(n_ctx=600))
    rt.ensure()
    with pytest.raises(GenerationError, match="do not fit"):
        rt.prefill("p", png(), reserve=512, eval_tokens=rt.llm.eval)
    names = [c[0] for c in rt._mtmd.calls]
    assert "mtmd_input_chunks_free" in names and "mtmd_bitmap_free" in names and rt.llm.evals == []
    rt._mtmd.bitmap_ok = False
    with pytest.raises(ImageFileError, match="could not be decoded"):
        rt.prefill("p", png(), reserve=0, eval_tokens=rt.llm.eval)


# -- LlamaModel.analyze_image: findings, stats, and the cache left empty ----------------------
class FakeRuntime:
    failed = None

    def __init__(self, outcome):
        self.outcome = outcome

    def analyze(self, backend, table, image, question, *, eval_tokens, cancel=None):
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome, 300, DecodeStats(sampled_tokens=20, fed_tokens=10)


def vision_shell(models_dir, outcome) -> LlamaModel:
    clip_gguf(models_dir / "mmproj-medgemma-1.5-4b-it-F16.gguf")
    model = shell("medgemma-1.5-4b-it", models_dir)
    model._lock, model._llm, model._table = threading.Lock(), FakeLlama(), object()
    model.cache, model._backend = SimpleNamespace(eval_seconds=0.0, eval=None), None
    model._vision = FakeRuntime(outcome)
    model.threads = ThreadGovernor(lambda threads: None, override=1)  # no llama.cpp to set
    return model


@pytest.mark.parametrize("outcome, error", [
    (FINDINGS, None), (BudgetExceeded(513), GenerationTruncated), (vision.VisionError("encode failed"), vision.VisionError),
])
def test_every_image_call_leaves_the_text_cache_empty(models_dir, tmp_path, outcome, error):
    image = tmp_path / "x.png"
    image.write_bytes(png())
    model = vision_shell(models_dir, outcome)
    if error is None:
        findings = model.analyze_image(image, "What do you see?")
        assert findings.confidence == "moderate" and findings.findings == ["No focal consolidation."]
        assert model.last_stats.node == "IMAGE_ANALYSIS" and model.last_stats.prompt_tokens == 300
    else:
        with pytest.raises(error):
            model.analyze_image(image, "What do you see?")
    assert model._llm.n_tokens == 0 and model._llm.cleared == 1


def test_a_cancel_before_the_call_stops_it(models_dir, tmp_path):
    image = tmp_path / "x.png"
    image.write_bytes(png())
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(GenerationCancelled):
        vision_shell(models_dir, FINDINGS).analyze_image(image, "q", cancel=cancel)
