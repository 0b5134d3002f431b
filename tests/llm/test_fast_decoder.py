"""SchemaDecoder's logic on a tiny scripted vocabulary (no model): choices, string endings,
fallbacks, bounds. The real-model checks are in tests/slow/test_fast_decoding.py."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field

from appliance.llm.fast import BudgetExceeded, SchemaDecoder, fast_supported
from appliance.llm.grammar import accepts, output_schema
from appliance.llm.token_table import TokenTable

# A character-level vocabulary plus a few multi-character pieces.
PIECES = ['{', '}', '"', ',', ':', '[', ']', 'a', 'b', 'c', ' ', '\n', 'null', 'ab', 'c"', '",', '\\', 'x'] + \
         [f'"{k}"' for k in ("kind", "text", "maybe", "items")] + ['"aa"', '"bbbb"', '<eos>']


def table() -> TokenTable:
    import re
    safe = np.array([bool(p) and p != '<eos>' and not re.search(r'["\\\x00-\x1f]', p) for p in PIECES])
    quote_prefix = [p.split('"', 1)[0] if '"' in p and not re.search(r'[\\\x00-\x1f]', p.split('"', 1)[0]) else None
                    for p in PIECES]
    return TokenTable(
        pieces=PIECES, raw=[p.encode() for p in PIECES], safe=safe, quote_prefix=quote_prefix,
        lengths=np.array([len(p) for p in PIECES]), leading_space=np.array([p[:1].isspace() for p in PIECES]),
        closers=np.array([i for i, q in enumerate(quote_prefix) if q == ""]),
    )


class ScriptedBackend:
    """Prefers, at each step, the next token of a wish list (or a fixed favourite)."""

    def __init__(self, wishes: list[str], favourite: str | None = None):
        self.wishes = list(wishes)
        self.favourite = favourite
        self.fed: list[int] = []
        self.rng = np.random.default_rng(0)

    def tokenize(self, text: str) -> list[int]:
        out, i = [], 0
        while i < len(text):  # greedy longest match over the vocabulary
            best = max((j for j, p in enumerate(PIECES) if p != '<eos>' and text.startswith(p, i)), key=lambda j: len(PIECES[j]))
            out.append(best)
            i += len(PIECES[best])
        return out

    def feed(self, tokens):
        self.fed += list(tokens)

    def logits(self):
        scores = np.zeros(len(PIECES))
        if self.favourite is not None:
            scores[PIECES.index(self.favourite)] = 5.0  # second best: what a fallback should find
        if self.wishes:
            scores[PIECES.index(self.wishes.pop(0))] = 10.0
        return scores


class Small(BaseModel):
    kind: Literal["aa", "bbbb"]
    text: str = Field(min_length=1, max_length=5)
    maybe: str | None = Field(max_length=3)


def decode(schema, backend, temperature=0.0, budget=None) -> str:
    dec = SchemaDecoder(backend, table(), temperature, budget=budget)
    return dec.decode(output_schema(schema))


def test_choices_strings_and_nulls_follow_the_logits():
    text = decode(Small, ScriptedBackend(['"bbbb"', 'ab', 'c"', 'null']))
    assert text == '{"kind":"bbbb","text":"abc","maybe":null}'
    assert accepts(Small, text)


def test_unsafe_tokens_are_masked_and_strings_are_bounded():
    # The model wants a newline, then a backslash: both are refused for the next best safe
    # piece; the string stops at its 5-character bound.
    text = decode(Small, ScriptedBackend(['"aa"', '\n', '\\'], favourite='ab'))
    assert accepts(Small, text)
    body = text.split('"text":"')[1].split('"')[0]
    assert len(body) == 5 and body.startswith("abab")


def test_a_required_string_cannot_start_with_space_or_be_empty():
    # A leading space is refused (the next best is taken), and so is closing an empty string.
    text = decode(Small, ScriptedBackend(['"aa"', ' ', '",', 'null'], favourite='x'))
    assert accepts(Small, text)
    assert text == '{"kind":"aa","text":"x","maybe":null}' 


def test_budget_is_enforced():
    with pytest.raises(BudgetExceeded):
        decode(Small, ScriptedBackend([], favourite='a'), budget=6)


def test_sampling_stays_inside_the_language():
    for seed in range(20):
        backend = ScriptedBackend([], favourite=None)
        backend.rng = np.random.default_rng(seed)
        assert accepts(Small, decode(Small, backend, temperature=1.0))


class Note(BaseModel):
    text: str = Field(max_length=5)


def test_a_model_that_closes_at_once_decided_without_sampling_a_token():
    # The closing quote is fed as scaffolding, so no token counts as sampled, but the model was
    # asked and chose to close: that is a model step. The property test counts steps.
    dec = SchemaDecoder(ScriptedBackend(['"']), table(), 0.0)
    assert dec.decode(output_schema(Note)) == '{"text":""}'
    assert dec.stats.sampled_tokens == 0 and dec.stats.model_steps == 1


def test_at_the_floor_budget_nothing_is_left_to_decide():
    backend = ScriptedBackend([], favourite="a")
    floor = len(backend.tokenize('{"text":""}'))
    dec = SchemaDecoder(backend, table(), 0.0, budget=floor)
    assert dec.decode(output_schema(Note)) == '{"text":""}' and dec.stats.model_steps == 0


class Arr(BaseModel):
    items: list[str] = Field(min_length=2, max_length=3)


def test_arrays_respect_min_and_max_items():
    text = decode(Arr, ScriptedBackend(['a', '",', 'b', '"', ']']))  # the model tries to stop after one item
    assert accepts(Arr, text) and text.startswith('{"items":["a","b"')


@pytest.mark.parametrize("schema,shortest", [
    (Small, '{"kind":"aa","text":"a","maybe":null}'),
    (Arr, '{"items":["a","a"]}'),
])
def test_a_budget_shorter_than_the_longest_output_still_ends_in_a_whole_object(schema, shortest):
    # The model never wants to stop; every budget from the shortest output's size up gives an
    # accepted object within the budget, closing strings (and lists, and nullables) early.
    floor = len(ScriptedBackend([]).tokenize(shortest))
    for budget in range(floor, floor + 30):
        backend = ScriptedBackend([], favourite="a")
        dec = SchemaDecoder(backend, table(), 0.0, budget=budget)
        text = dec.decode(output_schema(schema))
        assert accepts(schema, text), (budget, text)
        assert len(backend.fed) + len(backend.tokenize(dec.pending)) <= budget


class Unsupported(BaseModel):
    n: int


def test_unsupported_schemas_are_detected():
    assert fast_supported(Small.model_json_schema()) and fast_supported(Arr.model_json_schema())
    assert not fast_supported(Unsupported.model_json_schema())


@pytest.mark.parametrize("text,ok", [
    ('{"kind":"aa","text":"x","maybe":null}', True),
    ('{"kind": "aa","text":"x","maybe":null}', False),  # not compact
    ('{"text":"x","kind":"aa","maybe":null}', False),  # field order
    ('{"kind":"aa","text":" x","maybe":null}', False),  # leading space
    ('{"kind":"aa","text":"x\\ny","maybe":null}', False),  # escaped newline
    ('{"kind":"aa","text":"xxxxxx","maybe":null}', False),  # too long
    ('{"kind":"cc","text":"x","maybe":null}', False),  # not an allowed value
])
def test_reference_acceptance_check(text, ok):
    assert accepts(Small, text) is ok
