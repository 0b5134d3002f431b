"""The real runtime: one llama.cpp model per process, behind one lock.

Invariants:
- The model file is verified (exists, GGUF magic, sha256 when known) before llama.cpp opens
  it; a bad file raises ``ModelFileError``, never a crash.
- Every call into the llama.cpp object holds ``self._lock`` (llama.cpp is not thread-safe),
  including the whole iteration of a stream.
- Grammars come only from ``appliance.llm.grammar`` (checked text, cached per schema).
- ``max_tokens`` is always passed; a generation that stops on the limit raises
  ``GenerationTruncated`` instead of returning half an object.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Sequence

from appliance.errors import GenerationCancelled, GenerationTruncated, ModelFileError
from appliance.llm.base import CallStats, T, TokenCallback, parse_constrained
from appliance.llm.grammar import grammar_for
from appliance.llm.prompt import Message, render_gemma
from models.profiles import ModelProfile
from models.verify import verify_model_file


def load_llama(path: Path, n_ctx: int, n_threads: int | None = None):
    """Open a verified GGUF with llama.cpp (imported here: it is heavy and optional for fakes)."""
    import llama_cpp

    try:
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=n_threads or max(1, os.cpu_count() or 1),
            n_batch=512,
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        raise ModelFileError(f"llama.cpp could not load {path}: {exc}") from None


class LlamaModel:
    """A loaded GGUF behind the LanguageModel interface."""

    def __init__(self, profile: ModelProfile, path: Path, *, sha256: str | None = None, n_threads: int | None = None):
        hint = (
            "Place the operator-supplied GGUF there or set APPLIANCE_MODEL_PATH."
            if profile.operator_placed
            else "Run ./build.sh (or `appliance init`) to assemble the default model."
        )
        verify_model_file(path, sha256 if sha256 is not None else profile.sha256, hint=hint)
        self.profile = profile
        self.profile_name = profile.name
        self.path = path
        self._lock = threading.Lock()
        self._grammars: dict[type, object] = {}
        self.last_stats: CallStats | None = None
        self._llm = load_llama(path, profile.n_ctx, n_threads)

    # -- helpers -------------------------------------------------------------------------
    def _grammar(self, schema: type) -> object:
        cached = self._grammars.get(schema)
        if cached is None:
            from llama_cpp import LlamaGrammar

            cached = LlamaGrammar.from_string(grammar_for(schema), verbose=False)
            self._grammars[schema] = cached
        return cached

    def tokenize_count(self, text: str) -> int:
        with self._lock:
            return len(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=True))

    # -- interface -----------------------------------------------------------------------
    def generate_constrained(
        self, node: str, messages: Sequence[Message], schema: type[T], *, temperature: float, max_tokens: int
    ) -> T:
        prompt = render_gemma(messages)
        grammar = self._grammar(schema)
        started = time.perf_counter()
        with self._lock:
            out = self._llm.create_completion(
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                top_k=40 if temperature > 0 else 1,
                stop=list(self.profile.stop),
                grammar=grammar,
            )
        choice = out["choices"][0]
        usage = out.get("usage", {})
        self.last_stats = CallStats(
            node=node,
            prompt_tokens=usage.get("prompt_tokens", 0),
            completion_tokens=usage.get("completion_tokens", 0),
            seconds=time.perf_counter() - started,
            finish_reason=choice.get("finish_reason") or "",
        )
        if choice.get("finish_reason") == "length":
            raise GenerationTruncated(f"{node}: {schema.__name__} output hit max_tokens={max_tokens}")
        return parse_constrained(choice["text"], schema)

    def generate_free(
        self,
        node: str,
        messages: Sequence[Message],
        *,
        temperature: float,
        max_tokens: int,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> str:
        prompt = render_gemma(messages)
        started = time.perf_counter()
        pieces: list[str] = []
        finish = ""
        prompt_tokens = 0
        with self._lock:
            stream = self._llm.create_completion(
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                top_k=40 if temperature > 0 else 1,
                top_p=0.95,
                stop=list(self.profile.stop),
                stream=True,
            )
            try:
                for chunk in stream:
                    choice = chunk["choices"][0]
                    text = choice.get("text") or ""
                    if text:
                        pieces.append(text)
                        if on_token:
                            on_token(text)
                    finish = choice.get("finish_reason") or finish
                    if cancel is not None and cancel.is_set():
                        finish = "cancelled"
                        break
            finally:
                stream.close()
            if not prompt_tokens:
                prompt_tokens = self._llm.n_tokens - len(pieces)
        self.last_stats = CallStats(
            node=node,
            prompt_tokens=max(prompt_tokens, 0),
            completion_tokens=len(pieces),
            seconds=time.perf_counter() - started,
            finish_reason=finish,
        )
        if finish == "cancelled":
            raise GenerationCancelled(f"{node}: cancelled after {len(pieces)} pieces")
        return "".join(pieces)
