"""The reading of the message being worked on, for the parse functions that take text.

``dictation.instruction_text``, ``write_requests.write_requests``, ``chart_answers.chart_topics``
and ``task_patterns.named_steps`` take the message's text, and some modules still call them with
it (``knowledge_requests``). While a turn's reading is served (``serving``), a call with that
turn's message answers from the reading instead of parsing the words again; any other text is
parsed as before.

Invariants: a context variable, so each thread (each front end's worker) sees only its own
turn; ``serving`` restores what was there before when it ends, on an error too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_SERVED: ContextVar[Any] = ContextVar("served_reading", default=None)


def reading_for(text: str) -> Any:
    """The reading being served when ``text`` is its message, else None."""
    reading = _SERVED.get()
    return reading if reading is not None and reading.text == text else None


@contextmanager
def serving(reading: Any) -> Iterator[None]:
    """Serve ``reading`` (a ``RequestReading``) to the parse functions for the block."""
    token = _SERVED.set(reading)
    try:
        yield
    finally:
        _SERVED.reset(token)
