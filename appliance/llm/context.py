"""Prompt evaluation with prefix reuse, and a token-level backend for the fast decoders.

Invariants:
- Prompts are split into a static prefix (a node's fixed system text) and a dynamic rest; each
  is tokenized on its own, so the static prefix's tokens are identical on every call.
- Prompts arrive as parts (``appliance.llm.prompt``): only the template's own markers are
  tokenized as control tokens; every text part (system text, the clinician's words, tool
  results, history) is tokenized with special-token parsing off.
- Before a prompt is evaluated, the longest common prefix with the tokens already in the KV
  cache is kept; if that does not cover the static prefix, a saved KV snapshot of it is
  restored, or it is evaluated once and saved. Only the dynamic rest is prefilled.
- Snapshots hold one sequence's KV cells only (no logits: a 262k-vocabulary logit row is
  1 MiB, and llama-cpp-python's own save_state copies a whole n_batch x n_vocab array). Their
  total size is bounded; the least recently used is dropped first.
- Callers hold the model lock around everything here; ``before_eval`` (when set) runs under it
  before each evaluation, so the thread count can follow the machine's load within a call.
"""

from __future__ import annotations

import ctypes
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from appliance.llm.prompt import Parts, tokenize_parts


@dataclass
class PrefillStats:
    prompt_tokens: int = 0
    static_tokens: int = 0
    prefill_tokens: int = 0
    reused_tokens: int = 0
    snapshot_hit: bool = False  # the static prefix came from the cache, not this call
    snapshot_saved: bool = False


class PrefixCache:
    def __init__(self, llm, max_bytes: int = 256 << 20):
        import llama_cpp

        self.lib = llama_cpp
        self.llm = llm
        self.ctx = llm._ctx.ctx
        self.max_bytes = max_bytes
        self._snapshots: OrderedDict[Parts, tuple[list[int], ctypes.Array]] = OrderedDict()
        self._token_cache: dict[tuple[str, bool, bool], list[int]] = {}
        self._parts_cache: dict[Parts, list[int]] = {}
        self.eval_seconds = 0.0
        self.eval_calls = 0
        self.before_eval = None  # called before every evaluation (the runtime's thread policy)

    # -- bookkeeping ------------------------------------------------------------------
    @property
    def snapshot_bytes(self) -> int:
        return sum(len(buf) for _, buf in self._snapshots.values())

    @property
    def snapshot_count(self) -> int:
        return len(self._snapshots)

    def tokenize(self, text: str, *, bos: bool, special: bool = False) -> list[int]:
        key = (text, bos, special)
        cached = self._token_cache.get(key)
        if cached is None:
            cached = self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=special)
            if len(self._token_cache) < 256:
                self._token_cache[key] = cached
        return cached

    def raw_tokenize(self, text: str, bos: bool, special: bool) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=bos, special=special)

    def static_tokens(self, static: Parts) -> list[int]:
        """The tokens of a static prefix (BOS alone for none), cached: the same on every call."""
        cached = self._parts_cache.get(static)
        if cached is None:
            cached = tokenize_parts(self.raw_tokenize, static, bos=True)
            if len(self._parts_cache) < 256:
                self._parts_cache[static] = cached
        return cached

    def prompt_tokens(self, static: Parts, dynamic: Parts) -> list[int]:
        """The whole prompt's tokens, as ``prime`` would evaluate them."""
        return self.static_tokens(static) + tokenize_parts(self.raw_tokenize, dynamic, bos=False)

    def eval(self, tokens: list[int]) -> None:
        if not tokens:
            return
        if self.before_eval is not None:
            self.before_eval()
        started = time.perf_counter()
        self.llm.eval(tokens)
        self.eval_seconds += time.perf_counter() - started
        self.eval_calls += 1

    def truncate(self, n: int) -> None:
        """Forget everything after the first ``n`` tokens (the next eval overwrites it)."""
        self.llm.n_tokens = n

    def current(self) -> np.ndarray:
        return self.llm.input_ids[: self.llm.n_tokens]

    def clear(self) -> None:
        """Drop every snapshot and the context's tokens (for like-for-like comparisons)."""
        self._snapshots.clear()
        self.lib.llama_memory_seq_rm(self.lib.llama_get_memory(self.ctx), -1, -1, -1)
        self.llm.n_tokens = 0

    def start_from_static(self, static: Parts) -> None:
        """Leave exactly the static prefix in the cache (evaluated once, then from its
        snapshot): the state a node call starts from inside a turn."""
        s_tokens = self.static_tokens(static)
        if not self._restore(static):
            self.truncate(0)
            self.eval(s_tokens)
            self._save(static, s_tokens)

    # -- snapshots ----------------------------------------------------------------------
    def _save(self, key: Parts, tokens: list[int]) -> None:
        size = self.lib.llama_state_seq_get_size(self.ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = self.lib.llama_state_seq_get_data(self.ctx, buf, size, 0)
        if written != size:
            return
        self._snapshots[key] = (list(tokens), buf)
        self._snapshots.move_to_end(key)
        while self.snapshot_bytes > self.max_bytes and len(self._snapshots) > 1:
            self._snapshots.popitem(last=False)

    def _restore(self, key: Parts) -> bool:
        entry = self._snapshots.get(key)
        if entry is None:
            return False
        tokens, buf = entry
        mem = self.lib.llama_get_memory(self.ctx)
        self.lib.llama_memory_seq_rm(mem, 0, -1, -1)
        if self.lib.llama_state_seq_set_data(self.ctx, buf, len(buf), 0) != len(buf):
            self.lib.llama_memory_seq_rm(mem, 0, -1, -1)
            self.llm.n_tokens = 0
            return False
        self.llm.input_ids[: len(tokens)] = tokens
        self.llm.n_tokens = len(tokens)
        self._snapshots.move_to_end(key)
        return True

    # -- the one entry point -------------------------------------------------------------
    def prime(self, static: Parts, dynamic: Parts, reserve: int = 0) -> PrefillStats:
        """Make the KV cache hold static+dynamic with fresh logits for the last token, checking
        first that the prompt and ``reserve`` generated tokens fit the context."""
        s_tokens = self.static_tokens(static)
        target = self.prompt_tokens(static, dynamic)
        if len(target) + reserve > self.llm.n_ctx():
            from appliance.errors import GenerationError

            raise GenerationError(f"a prompt of {len(target)} tokens and up to {reserve} generated tokens "
                                  f"do not fit the {self.llm.n_ctx()}-token context")
        stats = PrefillStats(prompt_tokens=len(target), static_tokens=len(s_tokens))
        keep = _common_prefix(self.current(), target)
        stats.snapshot_hit = keep >= len(s_tokens) > 1  # the static prefix was already in place
        if keep < len(s_tokens):
            if self._restore(static):
                stats.snapshot_hit = True
                keep = len(s_tokens)
            else:
                self.truncate(keep)
                self.eval(s_tokens[keep:])
                stats.prefill_tokens += len(s_tokens) - keep
                self._save(static, s_tokens)
                stats.snapshot_saved = True
                keep = len(s_tokens)
        keep = min(keep, len(target) - 1)  # the last token is re-evaluated for its logits
        self.truncate(keep)
        self.eval(target[keep:])
        stats.prefill_tokens += len(target) - keep
        stats.reused_tokens = len(target) - stats.prefill_tokens
        return stats


def _common_prefix(a: np.ndarray, b: list[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n], dtype=a.dtype))
    return int(diff[0]) if len(diff) else n


class DecoderBackend:
    """What ``SchemaDecoder`` and the free-text loop use: logits, feed, tokenize."""

    def __init__(self, cache: PrefixCache, n_vocab: int, seed: int = 0):
        self.cache = cache
        self.n_vocab = n_vocab
        self.rng = np.random.default_rng(seed)
        self._lib = cache.lib

    def logits(self) -> np.ndarray:
        ptr = self._lib.llama_get_logits_ith(self.cache.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def feed(self, tokens: list[int]) -> None:
        self.cache.eval(list(tokens))

    def tokenize(self, text: str) -> list[int]:
        return self.cache.tokenize(text, bos=False, special=False)
