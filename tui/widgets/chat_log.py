"""The conversation: a scrolling column of ChatMessage widgets, newest at the bottom."""

from __future__ import annotations

from textual.containers import VerticalScroll

from tui.widgets.chat_message import ChatMessage

WELCOME = ("Ask a clinical question below and press Enter. Ctrl+O opens a patient; "
           "F1 lists every key; Ctrl+P searches all commands.")


class ChatLog(VerticalScroll):
    can_focus = True

    def on_mount(self) -> None:
        self.clear()

    def _add(self, text: str, kind: str) -> ChatMessage:
        message = ChatMessage(text, kind)
        self.mount(message)
        self.call_after_refresh(self.scroll_end, animate=False)
        return message

    def add_question(self, text: str) -> ChatMessage:
        return self._add(text, "question")

    def add_reply(self, waiting_text: str = "Thinking…") -> ChatMessage:
        return self._add(waiting_text, "pending")

    def add_notice(self, text: str) -> ChatMessage:
        return self._add(text, "notice")

    def scroll_to_latest(self) -> None:
        self.call_after_refresh(self.scroll_end, animate=False)

    def clear(self) -> None:
        self.remove_children()
        self.mount(ChatMessage(WELCOME, "notice", classes="welcome"))

    def messages(self) -> list[ChatMessage]:
        return [m for m in self.query(ChatMessage) if not m.has_class("welcome")]
