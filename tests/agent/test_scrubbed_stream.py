"""Streaming SYNTHESIZE output: however the model splits its pieces, what the clinician sees
is exactly the scrubbed final answer, and no piece ever shows an internal tool name."""

from __future__ import annotations

import itertools
import random

import pytest

from appliance.agent.nodes.synthesize import ScrubbedStream, scrub_internal_names
from mcp_servers.contracts import TOOL_LABELS

TEXTS = [
    "Per [check_drug_safety], dofetilide needs ECG monitoring.",
    "check_drug_interactions",
    "[search_patient] then get_patient_chart]] and check_drug_safety_v2.",
    "No internal names here, only [brackets] and check_ words.",
    "[[get_patient_chart",
]


def stream(pieces: list[str]) -> list[str]:
    out: list[str] = []
    s = ScrubbedStream(out.append)
    for piece in pieces:
        s(piece)
    s.flush()
    return out


def splits(text: str, cuts: tuple[int, ...]) -> list[str]:
    bounds = (0, *cuts, len(text))
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("text", TEXTS)
def test_every_two_and_three_way_split_streams_the_scrubbed_text(text):
    for n in (1, 2):
        for cuts in itertools.combinations(range(1, len(text)), n):
            out = stream(splits(text, cuts))
            assert "".join(out) == scrub_internal_names(text), cuts
            assert not any(name in piece for piece in out for name in TOOL_LABELS), cuts


@pytest.mark.parametrize("seed", range(20))
def test_random_token_sized_pieces(seed):
    rng = random.Random(seed)
    text = " ".join(rng.choice(TEXTS) for _ in range(4))
    cuts = tuple(sorted(rng.sample(range(1, len(text)), len(text) // 3)))
    out = stream(splits(text, cuts))
    assert "".join(out) == scrub_internal_names(text)
    assert not any(name in piece for piece in out for name in TOOL_LABELS)


def test_plain_text_is_not_held_back():
    out: list[str] = []
    s = ScrubbedStream(out.append)
    s("Warfarin ")
    s("and aspirin")
    assert out == ["Warfarin ", "and aspirin"]
