"""Small helpers the LLM nodes share: message assembly and token budgets."""

from __future__ import annotations

from pydantic import BaseModel

from appliance.llm.grammar import max_output_chars
from appliance.llm.prompt import Message


def conversation(system: str, user: str, history: tuple[tuple[str, str], ...] = ()) -> list[Message]:
    """System text, the recent exchanges (user/assistant), then the current user message."""
    messages = [Message("system", system)]
    for role, text in history:
        messages.append(Message("user" if role == "user" else "assistant", text))
    messages.append(Message("user", user))
    return messages


def token_budget(schema: type[BaseModel], seed_limit: int, *, whole: bool = False) -> int:
    """The node's token limit: docs/design.md §7's number.

    The fast decoder ends the object within it, closing free strings early when the limit is
    near, so a rambling model costs at most this many tokens. ``whole=True`` raises the limit
    to the longest output the grammar accepts (every token adds at least one character), for
    text that must never be cut: a clinician's dictated note.
    """
    return max(seed_limit, max_output_chars(schema) + 1) if whole else seed_limit
