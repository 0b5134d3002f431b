"""The fast decoder's walk on a clinic host: ``fast.SchemaDecoder`` with llama-server taking the
model steps, so a constrained call on the host feeds the schema's fixed text in batches instead
of decoding it token by token under llama.cpp's grammar sampler (docs/design.md §7, §21).

Invariants:
- The walk is ``SchemaDecoder``'s own: the same output language, field order, choices, budget
  and early closing as in process. Only a model step differs, and there are two kinds:
  - a choice (an enum, a boolean, null or a value, one more array item) is one request for one
    token, limited to the options' next tokens by ``logit_bias`` (+100 each, so the server's
    greedy or temperature choice falls among them, as ``SchemaDecoder._pick`` does in process);
  - a free string is one request whose grammar is the string's characters and its closing
    quote (``grammar.string_body_grammar``), stopped at the quote and bounded by the call's
    budget. llama.cpp checks the sampled token first and masks the vocabulary only when it is
    rejected, as the fast decoder does.
- The output's token ids are kept on this side: every request sends the prompt and the output
  so far as token ids with ``cache_prompt``, so the server evaluates only what it has not seen,
  fixed text in one batch. The token that closes a string is not kept: its quote joins the
  fixed text that follows, as in process.
- An image call (``ServerModel.analyze_image``) is the same walk over a text prompt with the
  server's media marker and the image, sent again with every request (the server keeps the
  image's embeddings in its prompt cache, keyed by the image's bytes).
- A request that fails raises the server runtime's errors (``ModelServerUnavailable``,
  ``GenerationCancelled``); ``SchemaDecoder``'s ``BudgetExceeded`` and ``Cancelled`` reach the
  caller as in process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from appliance.llm.fast import Cancelled, SchemaDecoder
from appliance.llm.grammar import string_body_grammar
from appliance.llm.prompt import neutralise

CHOICE_BIAS = 100.0  # added to each option's logit: far above any logit gap a model produces


class OffOptions(ValueError):
    """The server's answer to a choice was none of the options asked for."""


@dataclass
class ServerSteps:
    """``SchemaDecoder``'s backend on llama-server: the prompt and output so far as token ids,
    and the two requests a step can be. ``post(body, cancel)`` sends one /completion request and
    returns its JSON answer; ``tokenize(text)`` gives ids without BOS or special tokens;
    ``piece(token)`` a token's text."""

    post: Callable[[dict, threading.Event | None], dict]
    tokenize: Callable[[str], list[int]]
    piece: Callable[[int], str]
    tokens: list[int]  # the prompt's and the output's; the output's alone with ``image``
    temperature: float
    cancel: threading.Event | None = None
    # An image call: (the prompt as text with the server's media marker, the image as base64)
    # and how the output's tokens become text again. The server tokenizes an image prompt
    # whole with special tokens on, so the output's text joins it neutralised (prompt.neutralise).
    image: tuple[str, str] | None = None
    detokenize: Callable[[list[int]], str] | None = None
    requests: int = 0
    prefill_tokens: int = 0  # tokens the server evaluated from the requests' prompts
    eval_seconds: float = 0.0
    rng = None  # the server samples; SchemaDecoder._pick is never reached here

    def feed(self, tokens: list[int]) -> None:
        self.tokens.extend(tokens)

    def logits(self) -> np.ndarray:
        raise RuntimeError("llama-server sends no logits: a step on the host is a request")

    def _ask(self, fields: dict) -> dict:
        prompt: list[int] | dict = list(self.tokens)
        if self.image is not None:
            prompt = {"prompt_string": self.image[0] + neutralise(self.detokenize(self.tokens) if self.tokens else ""),
                      "multimodal_data": [self.image[1]]}
        body = {"prompt": prompt, "cache_prompt": True, "return_tokens": True,
                "temperature": self.temperature, "top_p": 1.0, "min_p": 0.0, **fields}
        answer = self.post(body, self.cancel)
        self.requests += 1
        timings = answer.get("timings", {})
        self.prefill_tokens += int(timings.get("prompt_n", 0))
        self.eval_seconds += (timings.get("prompt_ms", 0.0) + timings.get("predicted_ms", 0.0)) / 1000
        return answer

    def choose(self, candidates: np.ndarray) -> int:
        """One next token among ``candidates``."""
        allowed = [int(c) for c in candidates]
        answer = self._ask({"n_predict": 1, "logit_bias": [[c, CHOICE_BIAS] for c in allowed],
                            "top_k": 1 if self.temperature <= 0 else len(allowed)})
        tokens = answer.get("tokens") or []
        if len(tokens) != 1 or tokens[0] not in allowed:
            raise OffOptions(f"the model server chose {tokens[:2]} among {len(allowed)} options")
        return int(tokens[0])

    def string(self, lo: int, hi: int, n_predict: int, *, start: bool = True) -> tuple[list[int], str, bool]:
        """A free string's next tokens, their text and whether the model closed it (False: the
        ``n_predict`` bound cut it). The closing token is the last of the tokens."""
        answer = self._ask({"n_predict": n_predict, "grammar": string_body_grammar(lo, hi, start=start), "stop": ['"'],
                            "top_k": 1 if self.temperature <= 0 else 40})
        return [int(t) for t in answer.get("tokens") or []], answer.get("content", ""), answer.get("stop_type") == "word"


class ServerSchemaDecoder(SchemaDecoder):
    """``SchemaDecoder`` whose model steps are ``ServerSteps`` requests."""

    b: ServerSteps

    def __init__(self, steps: ServerSteps, temperature: float, budget: int | None = None,
                 cancel: threading.Event | None = None):
        super().__init__(steps, None, temperature, budget=budget, cancel=cancel)

    def _step(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled()
        self._flush()

    def _select(self, candidates: np.ndarray) -> int:
        self._step()
        if len(candidates) == 1:
            return int(candidates[0])
        self.stats.model_steps += 1
        return self.b.choose(candidates)

    def string_body(self, min_len: int, max_len: int, tail: int = 0) -> str:
        """As in process: the model writes until it closes the string; it is closed early at
        ``max_len`` or when one more token would leave too few for the quote and the tail, but
        not before ``min_len`` characters (then the budget's own check raises BudgetExceeded)."""
        body, before = "", ""
        while not before:
            self._step()
            if len(body) >= max_len:
                self.stats.closed_early += 1
                break
            left = self._left()  # a token is at least a character
            bound = max_len - len(body) + 1 if left is None else min(max_len - len(body) + 1, left - 2 - tail)
            if bound < 1:
                if len(body) >= min_len:
                    self.stats.closed_early += 1
                    break
                bound = 1
            self.stats.model_steps += 1
            kept, text, closed = self.b.string(max(0, min_len - len(body)), max_len - len(body), bound,
                                               start=not body)
            if closed:
                before = self.b.piece(kept.pop()).split('"', 1)[0]
            elif text.endswith("\ufffd"):  # cut inside a character: whole characters, fed as text
                text = before = text.rstrip("\ufffd")
                kept = []
            self._spend(len(kept))
            self.b.feed(kept)
            self.stats.sampled_tokens += len(kept)
            body += text
            if closed:
                if before and len(body) - len(before) >= min_len and not self._affords(len(before) + 1 + tail):
                    body, before = body[:-len(before)], ""  # as in process: no room for text glued to the quote
                    self.stats.closed_early += 1
                break
        self.pending += before
        self.out.append(body)
        self.literal('"')
        return body
