"""The line session's progress line: the step the turn is in and the elapsed seconds, on
standard error, rewritten in place about once a second while a turn runs.

Invariants:
- Nothing is written when standard error is not a terminal (scripts read standard output only).
- The line moves on its own (a ticker thread), so the elapsed time never freezes during a long
  model call; it is paused while the clinician answers an approval prompt, so the ticker never
  writes over a question, and cleared when the turn ends.
- Only the step's name and seconds are shown: never the model's words or chart text.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

TICK_SECONDS = 1.0


class Progress:
    def __init__(self, stream=None, tick: float = TICK_SECONDS):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.tick = tick
        self.started = time.monotonic()
        self.step = ""
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._paused = False
        self._thread: threading.Thread | None = None

    def start(self, step: str = "Working") -> Progress:
        """A turn begins: the clock restarts and the ticker runs until ``done``."""
        self.started, self.step, self._paused = time.monotonic(), step, False
        self._running.set()
        if self.live and (self._thread is None or not self._thread.is_alive()):
            self._thread = threading.Thread(target=self._ticker, name="line-progress", daemon=True)
            self._thread.start()
        self._draw()
        return self

    def _ticker(self) -> None:
        while self._running.is_set():
            time.sleep(self.tick)
            self._draw()

    def line(self) -> str:
        return f"  {self.step[:60]}... {int(time.monotonic() - self.started)} s"

    def _draw(self) -> None:
        with self._lock:
            if self.live and self._running.is_set() and not self._paused:
                self.stream.write("\r\033[K" + self.line())
                self.stream.flush()

    def note(self, text: str) -> None:
        """The step now running, in words (the agent's ``on_step``, the prescreen's progress)."""
        self.step = text
        self._draw()

    @contextlib.contextmanager
    def paused(self):
        """While the clinician answers a prompt: the line is cleared and not redrawn."""
        with self._lock:
            was, self._paused = self._paused, True
            if self.live and self._running.is_set():
                self.stream.write("\r\033[K")
                self.stream.flush()
        try:
            yield
        finally:
            self._paused = was
            self._draw()

    def done(self) -> None:
        with self._lock:
            running = self._running.is_set()
            self._running.clear()
            if self.live and running:
                self.stream.write("\r\033[K")
                self.stream.flush()
