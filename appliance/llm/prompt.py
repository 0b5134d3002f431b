"""Gemma turn rendering.

Invariant: system text is folded into the first user turn (Gemma has no system role), and the
rendered prompt always ends with an open model turn. We render ourselves because the shipped
GGUF has no chat template and llama-cpp-python's "gemma" chat format drops the system prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

START, END = "<start_of_turn>", "<end_of_turn>"
STOP_TOKENS = (END, "<eos>")


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


def render_gemma(messages: Sequence[Message]) -> str:
    """Render messages as Gemma turns ending with an open model turn."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns = [m for m in messages if m.role != "system"]
    if not turns or turns[0].role != "user":
        turns = [Message("user", "")] + list(turns)
    out = []
    for i, m in enumerate(turns):
        content = m.content
        if i == 0 and system:
            content = f"{system}\n\n{content}" if content else system
        role = "user" if m.role == "user" else "model"
        out.append(f"{START}{role}\n{content}{END}\n")
    out.append(f"{START}model\n")
    return "".join(out)


def split_static(messages: Sequence[Message]) -> tuple[str, str]:
    """(static prefix, dynamic rest) of the rendered prompt: the prefix is the first turn's
    opening and the system text, which a node keeps fixed from call to call."""
    rendered = render_gemma(messages)
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    if not system:
        return "", rendered
    static = f"{START}user\n{system}\n\n"
    if not rendered.startswith(static):  # a system text with no user text after it
        return "", rendered
    return static, rendered[len(static):]
