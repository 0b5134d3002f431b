"""Command palette entries for every action in ``tui.actions.ACTIONS``."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.actions import ACTIONS, key_display


class ClinicCommands(Provider):
    def _entries(self):
        for action in ACTIONS:
            title = f"{action.description} ({key_display(action.key)})"
            yield title, partial(self.app.run_action, action.action), action.description

    async def discover(self) -> Hits:
        for title, command, help_text in self._entries():
            yield DiscoveryHit(title, command, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, command, help_text in self._entries():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), command, text=title, help=help_text)
