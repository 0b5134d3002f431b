"""The status line: model profile and load state (while loading: the stage, the hashing
percentage and a bar; once loaded, the site's acceptance of the file), tokens per second of the last generation, the health of each MCP
server, and at the right the signed-in clinician ("no sign-in" when the appliance has no
clinician accounts).

Invariants:
- State is shown in words as well as colour ("up", "down"), so it stays readable on a
  16-colour console.
- While the model loads the line fits 80 columns with the longest stage and every server
  down (the tokens per second, meaningless before a generation, are left out until then;
  the bar moves, so a stage needs no clock). The clinician's name takes what room is left
  and is cut first, so the health words always show.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ProgressBar, Static

from tui.backend import SERVERS


class StatusBar(Horizontal):
    def __init__(self, profile: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.profile = profile
        self.load_state = "loading"  # loading | ready | failed
        self.load_detail = "starting"
        self.load_fraction: float | None = None  # while hashing: the part done, 0..1
        self.acceptance: str | None = None  # "accepted" | "not accepted" | "not measured"; None: a scripted model
        self.tokens_per_second: float | None = None
        self.health: dict[str, bool | None] = {s: None for s in SERVERS}
        self.clinician = ""
        self._loading_since = time.monotonic()

    def compose(self) -> ComposeResult:
        yield Static(id="status-model")
        yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="status-progress")
        yield Static(id="status-rest")
        yield Static(id="status-clinician", markup=False)

    def on_mount(self) -> None:
        self._timer = self.set_interval(0.2, self._tick)
        self._render_all()

    def _tick(self) -> None:
        if self.load_state == "loading":
            self._render_all()

    def show_loading(self, detail: str, fraction: float | None = None) -> None:
        self.load_state, self.load_detail, self.load_fraction = "loading", detail, fraction
        self._render_all()

    def set_ready(self, seconds: float, acceptance: str | None = None) -> None:
        self.load_state, self.load_detail, self.acceptance = "ready", f"{seconds:.1f} s", acceptance
        self._render_all()

    def set_failed(self) -> None:
        self.load_state, self.load_detail = "failed", ""
        self._render_all()

    def set_tokens_per_second(self, value: float) -> None:
        self.tokens_per_second = value
        self._render_all()

    def set_health(self, health: dict[str, bool | None]) -> None:
        self.health.update(health)
        self._render_all()

    def set_clinician(self, text: str) -> None:
        self.clinician = text
        self._render_all()

    def model_text(self) -> Text:
        text = Text(self.profile, style="bold")
        if self.load_state == "loading":
            text.append(f" {self.stage_text()}", style="bold")
        elif self.load_state == "ready":
            text.append(" ready", style="bold green")
            if self.acceptance:  # this site's acceptance run on the file (appliance model accept)
                text.append(f", {self.acceptance}", style="green" if self.acceptance == "accepted" else "yellow")
        else:
            text.append(" NOT LOADED", style="bold red")
        return text

    def stage_text(self) -> str:
        """The load stage in words ("verifying file", "hashing 45%", "loading into llama.cpp");
        before the loader reports one, the time spent so far."""
        if self.load_detail == "starting":
            return f"loading {time.monotonic() - self._loading_since:.1f} s"
        if self.load_fraction is not None:
            return f"{self.load_detail} {int(self.load_fraction * 100)}%"
        return self.load_detail

    def rest_text(self) -> Text:
        text = Text(" │")
        if self.load_state != "loading":
            tps = self.tokens_per_second
            text.append(f" {tps:.1f} tok/s" if tps else " — tok/s")
            text.append(" │")
        for server in SERVERS:
            state = self.health.get(server)
            word, style = {True: ("up", "green"), False: ("DOWN", "bold red"), None: ("?", "")}[state]
            text.append(f" {server}:")
            text.append(word, style=style)
        return text

    def _render_all(self) -> None:
        if not self.children:  # not composed yet; on_mount renders
            return
        self.query_one("#status-model", Static).update(self.model_text())
        bar = self.query_one("#status-progress", ProgressBar)
        bar.display = self.load_state == "loading"
        if self.load_fraction is None:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=self.load_fraction * 100)
        self.query_one("#status-rest", Static).update(self.rest_text())
        self.query_one("#status-clinician", Static).update(self.clinician)
