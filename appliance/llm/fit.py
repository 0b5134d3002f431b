"""Fitting a prompt into the model's context, by rule (docs/design.md §7).

Invariants:
- Code, not the model, checks the prompt's size: ``count`` is the runtime's own token count of
  the rendered prompt, and ``limit`` is the context size less the tokens the call may generate.
- When the prompt is too long, the earlier exchanges go first, oldest first, a whole exchange
  at a time; then the long tool results of the current message (``Message.shortenable``) are
  shortened, longest first, each ending with ``SHORTENED``; the system text and the current
  message's own words (the clinician's question) are never cut.
- A prompt that still does not fit raises ``ContextOverflow`` with a message the clinician can
  act on; nothing is silently dropped from the question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from appliance.errors import ContextOverflow
from appliance.llm.prompt import Message

SHORTENED = "(shortened to fit the model's context: the full result is in the record)"
MIN_RESULT_CHARS = 200  # a shortened result keeps at least this much of its beginning

Count = Callable[[Sequence[Message]], int]


@dataclass(frozen=True)
class Fitted:
    messages: list[Message]
    tokens: int
    history_dropped: int = 0  # earlier messages left out (user and assistant turns)
    results_shortened: int = 0  # shortening steps applied to tool results

    @property
    def trimmed(self) -> bool:
        return bool(self.history_dropped or self.results_shortened)


def fit_messages(messages: Sequence[Message], count: Count, limit: int) -> Fitted:
    """``messages`` made to fit ``limit`` tokens by the rules above."""
    messages = list(messages)
    tokens = count(messages)
    if tokens <= limit:
        return Fitted(messages, tokens)
    system = [m for m in messages if m.role == "system"]
    turns = [m for m in messages if m.role != "system"]
    history, current = turns[:-1], turns[-1:]
    dropped = 0
    while history and tokens > limit:
        cut = 1
        while cut < len(history) and history[cut].role != "user":
            cut += 1  # one exchange: a clinician message and the answers after it
        history, dropped = history[cut:], dropped + cut
        messages = system + history + current
        tokens = count(messages)
    shortened = 0
    while tokens > limit and current:
        last = current[0]
        longest = max(last.shortenable, key=len, default="")
        if len(longest) <= MIN_RESULT_CHARS + len(SHORTENED) + 1:
            break
        shorter = _shorten(longest, max(MIN_RESULT_CHARS, len(longest) // 2))
        sections = tuple(shorter if s is longest else s for s in last.shortenable)
        current = [replace(last, content=last.content.replace(longest, shorter, 1), shortenable=sections)]
        shortened += 1
        messages = system + history + current
        tokens = count(messages)
    if tokens > limit:
        raise ContextOverflow(
            f"the message is too long for the model: the prompt needs {tokens} tokens and the model can take "
            f"{limit} (earlier exchanges and long results were already left out); please shorten the message")
    return Fitted(messages, tokens, dropped, shortened)


def _shorten(text: str, chars: int) -> str:
    """The first ``chars`` characters of ``text`` (at a line end when there is one), marked."""
    head = text[:chars]
    if "\n" in head[chars // 2:]:
        head = head.rsplit("\n", 1)[0]
    return f"{head}\n{SHORTENED}"
