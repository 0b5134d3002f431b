"""Sizing pages, paragraphs and criteria to the loaded model's context, by code.

The rule: a piece of protocol text given to one model call may use at most

    budget = min(cap, (n_ctx - prompt_tokens(stage's prompt with the text left empty)
                          - max_tokens(stage's output) - MARGIN) / (1 + copies))

where ``copies`` is how many times the output may repeat the text (2 for the split call, which
copies its passage into JSON; 0 for the others).

tokens, counted by the model's own tokenizer (``tokenize_count`` on the real runtime; a
conservative estimate, UTF-8 bytes / 3, for a model without one, such as the scripted model).
``cap`` keeps calls short on a small model (``ExtractionConfig``). A longer piece is cut at
paragraph breaks, then line breaks, then sentence ends, then between words, never inside a word,
so every call's prompt fits the context and no text is dropped.

Invariants: ``split_to_fit`` returns pieces that each count at most ``budget`` and that hold
every word of the input, in order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from appliance.extraction.errors import ExtractionError
from appliance.llm.prompt import Message, render_gemma

DEFAULT_N_CTX = 8192  # a model that names no context size (the scripted model)
MARGIN = 32  # tokens for the joins between the template and the text, and rounding
MIN_BUDGET = 48  # below this, a stage cannot see enough text to be useful

Count = Callable[[str], int]


def token_counter(model) -> Count:
    """The model's own token count when it has one, else a conservative estimate."""
    exact = getattr(model, "tokenize_count", None)
    if callable(exact):
        return exact
    return lambda text: math.ceil(len(text.encode("utf-8")) / 3) + 1


def context_size(model, override: int | None = None) -> int:
    """The loaded model's context size (its profile's ``n_ctx``), unless overridden."""
    if override:
        return override
    profile = getattr(model, "profile", None)
    return int(getattr(profile, "n_ctx", 0) or DEFAULT_N_CTX)


def text_budget(count: Count, n_ctx: int, messages: Sequence[Message], max_tokens: int, cap: int,
                copies: int = 0) -> int:
    """Tokens left for the text of one call whose prompt, with the text empty, is ``messages``
    and whose output is ``max_tokens`` plus ``copies`` times the text (a call that copies it)."""
    overhead = count(render_gemma(messages))
    budget = min(cap, (n_ctx - overhead - max_tokens - MARGIN) // (1 + copies))
    if budget < MIN_BUDGET:
        raise ExtractionError(f"the model's context ({n_ctx} tokens) is too small for criteria extraction: "
                              f"{overhead} prompt and {max_tokens} output tokens leave {budget} for the text")
    return budget


def split_to_fit(text: str, budget: int, count: Count) -> list[str]:
    """``text`` as pieces of at most ``budget`` tokens each, cut at the largest unit that fits."""
    text = text.strip()
    if not text:
        return []
    if count(text) <= budget:
        return [text]
    for pattern, joiner in ((r"\n\s*\n", "\n\n"), (r"\n", "\n"), (r"(?<=[.!?;])\s+", " "), (r"\s+", " ")):
        parts = [p for p in re.split(pattern, text) if p.strip()]
        if len(parts) > 1:
            return _pack(parts, joiner, budget, count)
    return _hard_cut(text, budget, count)


def _pack(parts: list[str], joiner: str, budget: int, count: Count) -> list[str]:
    """Consecutive parts joined greedily while the joined text fits; a part too big alone is
    split further."""
    out: list[str] = []
    current = ""
    for part in parts:
        if count(part) > budget:
            if current:
                out.append(current)
                current = ""
            out.extend(split_to_fit(part, budget, count))
            continue
        candidate = f"{current}{joiner}{part}" if current else part
        if count(candidate) <= budget:
            current = candidate
        else:
            out.append(current)
            current = part
    if current:
        out.append(current)
    return out


def _hard_cut(word: str, budget: int, count: Count) -> list[str]:
    """One overlong run of characters with no space in it, cut by characters."""
    out, start = [], 0
    while start < len(word):
        lo, hi = start + 1, len(word)
        while lo < hi:  # longest prefix that fits
            mid = (lo + hi + 1) // 2
            if count(word[start:mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        out.append(word[start:lo])
        start = lo
    return out
