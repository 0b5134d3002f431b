"""The progress line of long jobs (imports, evaluations, extraction, bundling).

Invariant: it draws on stderr, and only when stderr is a terminal, so stdout stays the result
and a pipe never receives the bar's carriage returns (a job may print its own plain progress
lines to stderr when it is not a terminal, as ``appliance extract`` does).
"""

from __future__ import annotations

import sys


class ProgressBar:
    """One self-rewriting line on stderr (a terminal only): a label, a bar and counts, or a note."""

    WIDTH = 24

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown = False

    def show(self, label: str, done: int, total: int, tail: str = "") -> None:
        filled = int(self.WIDTH * done / total) if total else self.WIDTH
        self.note(f"{label:<24} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total}"
                  + (f"  {tail}" if tail else ""))

    def note(self, message: str) -> None:
        if not self.enabled:
            return
        self.stream.write(f"\r{message}\x1b[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False
