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


def token_budget(schema: type[BaseModel], seed_limit: int) -> int:
    """The seed's limit, raised to the longest output the grammar accepts.

    Every generated token adds at least one character, so with this budget a constrained
    call always finishes its object instead of being cut off.
    """
    return max(seed_limit, max_output_chars(schema) + 1)
