"""Grounding configuration: loop bounds and the confidence bands (docs/design.md §16).

Invariant: the rules the bands drive live in code (``appliance.grounding.loop``); the numbers
live here, so a site can move them without touching a prompt.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from appliance.errors import ConfigError
from mcp_servers.umls.grounding import (
    DEFAULT_ACCEPT,
    DEFAULT_LOW,
    MAX_CANDIDATES,
    band_of,
)


def _default_values() -> dict[str, float]:
    return {"high": 0.9, "moderate": 0.6, "low": 0.3}


@dataclass(frozen=True)
class GroundingConfig:
    max_iterations: int = 3  # evaluate rounds per text; code ends the loop after the last
    max_candidates: int = MAX_CANDIDATES  # candidates shown per entity (concept_search max_results)
    accept_threshold: float = DEFAULT_ACCEPT  # confidence >= this: band "accept"
    low_threshold: float = DEFAULT_LOW  # >= this (and below accept): band "low"; below: "review"
    # The model answers a confidence word; this maps it to the number reported and banded.
    confidence_values: dict[str, float] = field(default_factory=_default_values)

    def __post_init__(self):
        if not 1 <= self.max_iterations <= 10:
            raise ConfigError("grounding: max_iterations must be between 1 and 10")
        if not 1 <= self.max_candidates <= 5:
            raise ConfigError("grounding: max_candidates must be between 1 and 5")
        if not 0.0 <= self.low_threshold <= self.accept_threshold <= 1.0:
            raise ConfigError("grounding: need 0 <= low_threshold <= accept_threshold <= 1")
        if set(self.confidence_values) != {"high", "moderate", "low"} or \
                not all(0.0 <= v <= 1.0 for v in self.confidence_values.values()):
            raise ConfigError("grounding: confidence_values maps high, moderate and low to numbers in [0, 1]")

    def band(self, confidence: float) -> str:
        return band_of(confidence, self.accept_threshold, self.low_threshold)

    def to_json(self) -> dict:
        return asdict(self)
