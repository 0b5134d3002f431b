"""Gemma turn rendering.

Invariants:
- System text is folded into the first user turn (Gemma has no system role), and the rendered
  prompt always ends with an open model turn. We render ourselves because the shipped GGUF has
  no chat template and llama-cpp-python's "gemma" chat format drops the system prompt.
- Only the template's own turn markers become control tokens. A prompt is rendered as parts,
  each either one of the template's markers or text; ``tokenize_parts`` tokenizes text parts
  without special-token parsing, so a message (the clinician's words, a chart, a tool result,
  earlier answers) that contains ``<end_of_turn>`` or ``<start_of_turn>`` stays plain text and
  can neither close its turn nor open a new one. Text parts break exactly where llama.cpp's own
  special-token split would, so a prompt without marker text tokenizes as before.
- Where a tokenizer can only parse a whole string with special tokens on (llama.cpp's
  multimodal prompt), ``neutralise`` breaks every special-token-shaped tag in untrusted text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

START, END = "<start_of_turn>", "<end_of_turn>"


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str
    # Substrings of ``content`` the runtime may shorten when the prompt does not fit the
    # model's context (tool results; ``appliance.llm.fit``); never the clinician's words.
    shortenable: tuple[str, ...] = ()


# One piece of a rendered prompt: (text, True when it is one of the template's own markers).
Part = tuple[str, bool]
Parts = tuple[Part, ...]
# (text, add BOS, parse special tokens) -> token ids: llama.cpp's tokenizer, bound to a model.
Tokenize = Callable[[str, bool, bool], list[int]]
_TAG_RE = re.compile(r"<(?=[^\s<>]{1,64}>)")
WORD_JOINER = "\u2060"


def render_parts(messages: Sequence[Message]) -> Parts:
    """The Gemma turns of ``messages`` as parts, ending with an open model turn; the text
    between two markers is one part (where llama.cpp would split it too)."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns = [m for m in messages if m.role != "system"]
    if not turns or turns[0].role != "user":
        turns = [Message("user", "")] + list(turns)
    out: list[Part] = []
    for i, m in enumerate(turns):
        content = m.content
        if i == 0 and system:
            content = f"{system}\n\n{content}" if content else system
        role = "user" if m.role == "user" else "model"
        out += [(START, True), (f"{role}\n{content}", False), (END, True), ("\n", False)]
    out += [(START, True), ("model\n", False)]
    return tuple(out)


def text_of(parts: Sequence[Part]) -> str:
    return "".join(text for text, _ in parts)


def render_gemma(messages: Sequence[Message]) -> str:
    """Render messages as Gemma turns ending with an open model turn (as one string: for
    display, keys and the multimodal prompt; models tokenize ``render_parts``)."""
    return text_of(render_parts(messages))


def split_parts(messages: Sequence[Message]) -> tuple[Parts, Parts]:
    """(static prefix, dynamic rest) of the rendered prompt: the prefix is the first turn's
    opening and the system text, which a node keeps fixed from call to call."""
    parts = render_parts(messages)
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    opening = f"user\n{system}\n\n"
    if not system or not parts[1][0].startswith(opening):  # a system text with no user text after it
        return (), parts
    rest = parts[1][0][len(opening):]
    dynamic = ((rest, False),) if rest else ()
    return ((START, True), (opening, False)), dynamic + parts[2:]


def tokenize_parts(tokenize: Tokenize, parts: Sequence[Part], *, bos: bool) -> list[int]:
    """Token ids of ``parts``: markers as their control tokens, text with special-token parsing
    off, so text can never become a control token."""
    tokens: list[int] = []
    for i, (text, marker) in enumerate(parts):
        tokens += tokenize(text, bos and i == 0, marker)
    if bos and not parts:
        tokens = tokenize("", True, False)
    return tokens


def neutralise(text: str) -> str:
    """``text`` with every special-token-shaped tag (``<end_of_turn>``, ``<eos>``,
    ``<__media__>``...) broken by an invisible word joiner after its ``<``: for the one prompt
    that llama.cpp tokenizes whole with special tokens on."""
    return _TAG_RE.sub("<" + WORD_JOINER, text)
