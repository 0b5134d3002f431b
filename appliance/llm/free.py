"""Free-text decoding in process, sampled as the clinic host samples.

Invariants:
- At temperature 0 a token is the argmax of the last logits (the first on a tie), as
  llama-server's ``top_k=1`` gives; with flash attention on both sides (``llama.load_llama``)
  the same prompt gives the same text in process and on the host.
- Above 0 the token comes from llama.cpp's own sampler chain with llama-server's defaults in
  llama-server's order: top-k 40, top-p 0.95, min-p 0.05, then the temperature, then a draw. So
  a terminal writes with the same distribution whichever runtime answers, and no Python loops
  over the 262k-entry vocabulary per token.
- A chain holds llama.cpp memory: ``FreeSampler`` is a context manager and frees it on exit.
  Its seed is given by the caller (the runtime draws it from its seeded generator, so a process
  repeats its own sequence of answers).
- ``decode`` feeds each sampled token back before the next, stops at end-of-generation unless
  told not to, streams whole UTF-8 characters only (a character split across tokens is held
  until complete), and checks ``cancel`` before every token. The caller holds the model lock
  throughout.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# llama-server's defaults (its /props "default_generation_settings"); ``ServerModel`` sends
# top_k itself (40, or 1 at temperature 0) and leaves the others at these values.
TOP_K = 40
TOP_P = 0.95
MIN_P = 0.05


class FreeSampler:
    """The next token from the context's last logits: argmax at temperature 0, else llama.cpp's
    chain with the host's settings."""

    def __init__(self, lib, ctx, logits: Callable[[], np.ndarray], temperature: float, seed: int):
        self.lib = lib
        self.ctx = ctx
        self.logits = logits
        self.chain = None
        if temperature > 0:
            params = lib.llama_sampler_chain_default_params()
            params.no_perf = True
            chain = lib.llama_sampler_chain_init(params)
            for sampler in (lib.llama_sampler_init_top_k(TOP_K), lib.llama_sampler_init_top_p(TOP_P, 0),
                            lib.llama_sampler_init_min_p(MIN_P, 0),
                            lib.llama_sampler_init_temp_ext(temperature, 0.0, 1.0),
                            lib.llama_sampler_init_dist(seed & 0xFFFFFFFF)):
                lib.llama_sampler_chain_add(chain, sampler)  # the chain owns each sampler
            self.chain = chain

    def __enter__(self) -> FreeSampler:
        return self

    def __exit__(self, *exc) -> None:
        if self.chain is not None:
            self.lib.llama_sampler_free(self.chain)
            self.chain = None

    def sample(self) -> int:
        if self.chain is None:
            return int(np.argmax(self.logits()))
        return int(self.lib.llama_sampler_sample(self.chain, self.ctx, -1))


@dataclass
class FreeResult:
    pieces: list[str] = field(default_factory=list)
    sampled: int = 0  # tokens sampled, the end-of-generation token included
    finish: str = "length"  # "stop", "length" or "cancelled"

    @property
    def completion_tokens(self) -> int:
        return self.sampled - 1 if self.finish == "stop" else self.sampled


def decode(sampler: FreeSampler, feed: Callable[[list[int]], None], raw: list[bytes],
           is_eog: Callable[[int], bool], max_tokens: int, *, on_token: Callable[[str], None] | None = None,
           cancel: threading.Event | None = None, ignore_eog: bool = False) -> FreeResult:
    """Up to ``max_tokens`` tokens from the primed context; ``raw`` is each token's bytes."""
    out = FreeResult()
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for out.sampled in range(1, max_tokens + 1):
        if cancel is not None and cancel.is_set():
            out.finish = "cancelled"
            break
        token = sampler.sample()
        if not ignore_eog and is_eog(token):
            out.finish = "stop"
            break
        feed([token])
        text = utf8.decode(raw[token])
        if text:
            out.pieces.append(text)
            if on_token is not None:
                on_token(text)
    tail = utf8.decode(b"", final=True)
    if tail:
        out.pieces.append(tail)
    return out
