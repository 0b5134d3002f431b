"""The small interface every language model in the appliance implements.

Invariants:
- ``generate_constrained`` returns an instance of the schema or raises a ``GenerationError``;
  it never returns unvalidated data.
- ``generate_free`` returns text; ``on_token`` sees each piece as it is produced. Either call
  stops before its next model step once ``cancel`` is set, raising ``GenerationCancelled``.
- Each call records a ``CallStats`` in ``last_stats`` for traces and benchmarks.
- Images are a capability apart: a model that can take them is also a ``VisionModel``, found
  with ``isinstance``; ``vision_available`` then says whether it can right now.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Protocol,
    TypeVar,
    runtime_checkable,
)

from pydantic import BaseModel, ValidationError

from appliance.errors import ConstrainedOutputInvalid
from appliance.llm.prompt import Message

if TYPE_CHECKING:
    from appliance.llm.vision import ImageFindings

T = TypeVar("T", bound=BaseModel)
TokenCallback = Callable[[str], None]


@dataclass
class CallStats:
    node: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    finish_reason: str = ""
    prefill_tokens: int = 0  # prompt tokens actually evaluated (the rest came from the cache)
    static_tokens: int = 0  # tokens of the node's fixed prefix (system text)
    cache_hit: bool = False
    eval_seconds: float = 0.0  # time inside llama.cpp evaluation
    sampled_tokens: int = 0  # tokens chosen from logits (the rest were fed in batches)
    model_steps: int = 0  # times the model's logits decided something (choices, characters, closes)
    fallbacks: int = 0  # steps where the first choice was rejected
    closed_early: int = 0  # strings the decoder closed at their maxLength or the token budget
    history_dropped: int = 0  # earlier messages left out to fit the context (appliance.llm.fit)
    results_shortened: int = 0  # tool-result shortenings made to fit the context

    @property
    def tokens_per_second(self) -> float:
        return self.completion_tokens / self.seconds if self.seconds > 0 else 0.0


class LanguageModel(Protocol):
    profile_name: str
    last_stats: CallStats | None

    def generate_constrained(
        self,
        node: str,
        messages: Sequence[Message],
        schema: type[T],
        *,
        temperature: float,
        max_tokens: int,
        cancel: threading.Event | None = None,
    ) -> T: ...

    def generate_free(
        self,
        node: str,
        messages: Sequence[Message],
        *,
        temperature: float,
        max_tokens: int,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> str: ...


@runtime_checkable
class VisionModel(Protocol):
    """A language model that can also analyse an attached image (``appliance.llm.vision``).

    ``vision_available`` may change while the model is loaded (a projector llama.cpp refuses
    at first use), so callers read it before every image, after the ``isinstance`` check."""

    @property
    def vision_available(self) -> bool: ...

    def analyze_image(
        self, image_path: str | Path, question: str, *, cancel: threading.Event | None = None,
    ) -> ImageFindings:
        """Findings of one PNG/JPEG; raises ``VisionUnavailable``, ``ImageFileError`` or
        another ``ApplianceError`` when there are none."""


def parse_constrained(text: str, schema: type[T]) -> T:
    """Parse and validate model output against a schema."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConstrainedOutputInvalid(f"{schema.__name__}: output is not JSON ({exc.msg})") from None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or schema.__name__
        raise ConstrainedOutputInvalid(f"{schema.__name__}: {where}: {first['msg']}") from None
