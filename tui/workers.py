"""Helpers for the app's thread workers: the per-turn record and abandonable blocking calls.

Invariant: nothing here touches widgets except through the ``Turn.reply`` handle, which only
the app's handlers use (on the UI thread).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tui.widgets.chat_message import ChatMessage


class Closing(Exception):
    """The app is closing; a worker stops waiting for a blocking call."""


def abandonable(closed: threading.Event, fn, *args, **kwargs):
    """Run a blocking call in a daemon thread and wait for it unless the app closes first.

    Textual's thread workers run in asyncio's default executor, which the app joins on exit;
    a tool call stuck on an unresponsive server must not hold the terminal open after Quit.
    """
    box: dict = {}
    done = threading.Event()

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the worker below
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="clinic-call", daemon=True).start()
    while not done.wait(0.05):
        if closed.is_set():
            raise Closing()
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass
class Turn:
    id: int
    question: str
    reply: ChatMessage
    patient_id: str | None
    image_path: str | None
    cancel: threading.Event = field(default_factory=threading.Event)
    started: bool = False
    began: float = 0.0  # time.monotonic() when the turn started
    step: str = "Thinking"  # the step the agent is in (its last trace event's label)
