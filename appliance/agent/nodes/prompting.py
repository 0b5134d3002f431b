"""Small helpers the LLM nodes share: message assembly and how prompts list the tools (their
token budgets are ``appliance.llm.grammar.token_budget``).

Invariant: every prompt that lists the tools lists all of them in ``PROMPT_TOOLS`` order (by
name, so no tool is singled out by coming first), each with its example from ``TOOL_EXAMPLES``
(one per tool, on its record in ``mcp_servers.contracts``, so no tool is the only one shown by
example)."""

from __future__ import annotations

from appliance.llm.prompt import Message
from mcp_servers.contracts import TOOL_EXAMPLES, TOOLS, WRITE_TOOLS

PROMPT_TOOLS: tuple[str, ...] = tuple(sorted(TOOLS))
__all__ = ["PROMPT_TOOLS", "TOOL_EXAMPLES", "conversation", "shortenable"]


def conversation(system: str, user: str, history: tuple[tuple[str, str], ...] = (),
                 results: tuple[str, ...] = ()) -> list[Message]:
    """System text, the recent exchanges (user/assistant), then the current user message;
    ``results`` are the tool results inside it, which the runtime may shorten to fit the
    context (never the rest of the message)."""
    messages = [Message("system", system)]
    for role, text in history:
        messages.append(Message("user" if role == "user" else "assistant", text))
    messages.append(Message("user", user, shortenable=tuple(r for r in results if r)))
    return messages


def shortenable(results) -> tuple[str, ...]:
    """The formatted successful read results among ``results`` (``ToolResult``s): what the
    runtime may shorten to fit the context. A write's result (with its safety report) and
    every error message stay whole."""
    return tuple(r.formatted_result for r in results
                 if r.error_type is None and r.formatted_result and r.tool_name not in WRITE_TOOLS)
