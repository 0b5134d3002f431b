"""A scripted model for routing tests: a queue of replies per node and a history of prompts.

Invariant: replies still go through the same validation as the real model's output, so a
script cannot smuggle an object the schema would refuse. It never stands in for the real
runtime in tests of the runtime itself.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance.errors import GenerationCancelled, ScriptError
from appliance.llm import vision as vision_mod
from appliance.llm.base import CallStats, T, TokenCallback, parse_constrained
from appliance.llm.prompt import Message


@dataclass
class Call:
    node: str
    messages: list[Message]
    schema: str | None
    temperature: float
    max_tokens: int


class ScriptedModel:
    """A ``LanguageModel`` and a ``VisionModel``. ``vision`` sets ``vision_available``; by
    default a script that queues replies for ``IMAGE_ANALYSIS`` (``analyze_image``'s node
    name) stands for a model with a projector."""

    profile_name = "scripted"

    def __init__(self, replies: dict[str, list[Any]] | None = None, *, vision: bool | None = None):
        self._queues: dict[str, deque] = defaultdict(deque)
        self.history: list[Call] = []
        self.last_stats: CallStats | None = None
        for node, items in (replies or {}).items():
            for item in items:
                self.enqueue(node, item)
        self.vision_available = bool(self._queues.get(vision_mod.NODE)) if vision is None else vision

    def enqueue(self, node: str, reply: Any) -> ScriptedModel:
        """Queue a reply for a node: a dict (constrained), a str (free text) or an Exception."""
        self._queues[node].append(reply)
        return self

    def pending(self) -> dict[str, int]:
        return {node: len(q) for node, q in self._queues.items() if q}

    def _next(self, node: str) -> Any:
        queue = self._queues.get(node)
        if not queue:
            raise ScriptError(f"the script has no reply left for node {node}")
        reply = queue.popleft()
        if isinstance(reply, Exception):
            raise reply
        return reply

    def generate_constrained(self, node, messages: Sequence[Message], schema: type[T], *, temperature, max_tokens,
                             cancel: threading.Event | None = None) -> T:
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled(f"{node}: cancelled")
        self.history.append(Call(node, list(messages), schema.__name__, temperature, max_tokens))
        reply = self._next(node)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        self.last_stats = CallStats(node=node, completion_tokens=len(text) // 4)
        return parse_constrained(text, schema)

    def generate_free(
        self,
        node,
        messages: Sequence[Message],
        *,
        temperature,
        max_tokens,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> str:
        self.history.append(Call(node, list(messages), None, temperature, max_tokens))
        reply = self._next(node)
        if not isinstance(reply, str):
            raise ScriptError(f"free-text reply for {node} must be a string")
        pieces = []
        for word in reply.split(" "):
            if cancel is not None and cancel.is_set():
                raise GenerationCancelled(f"{node}: cancelled after {len(pieces)} pieces")  # as the runtime does
            piece = word if not pieces else " " + word
            pieces.append(piece)
            if on_token:
                on_token(piece)
        self.last_stats = CallStats(node=node, completion_tokens=len(pieces))
        return "".join(pieces)

    def analyze_image(self, image_path: str | Path, question: str, *,
                      cancel: threading.Event | None = None) -> vision_mod.ImageFindings:
        """The next ``IMAGE_ANALYSIS`` reply as ``ImageFindings``, after the runtime's own
        availability and image-file checks."""
        if not self.vision_available:
            raise vision_mod.VisionUnavailable("image analysis is unavailable: the scripted model has no projector")
        vision_mod.read_image(image_path)
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled(f"{vision_mod.NODE}: cancelled before it started")
        node = vision_mod.NODE
        self.history.append(Call(node, vision_mod.image_messages(question), "ImageFindings",
                                 vision_mod.TEMPERATURE, vision_mod.MAX_TOKENS))
        reply = self._next(node)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        self.last_stats = CallStats(node=node, completion_tokens=len(text) // 4)
        return parse_constrained(text, vision_mod.ImageFindings)
