"""SchemaDecoder on lists of objects and one-value nullable enums, on the scripted vocabulary of
test_fast_decoder (no model). The grounding extraction schema is a list of objects."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from appliance.llm.fast import SchemaDecoder, fast_supported
from appliance.llm.grammar import accepts, output_schema
from tests.llm.test_fast_decoder import ScriptedBackend, decode, table


class Item(BaseModel):
    kind: Literal["aa", "bbbb"]
    text: str = Field(min_length=1, max_length=3)


class Items(BaseModel):
    items: list[Item] = Field(max_length=3)


class TwoAtLeast(BaseModel):
    items: list[Item] = Field(min_length=2, max_length=3)


class OneValue(BaseModel):
    kind: Literal["aa"] | None
    text: str = Field(max_length=2)


def test_lists_of_objects_are_fast_schemas():
    assert fast_supported(Items.model_json_schema()) and fast_supported(TwoAtLeast.model_json_schema())


def test_items_follow_the_logits_and_the_model_may_stop():
    # first item, then "," + "{" for a second, then "]"
    text = decode(Items, ScriptedBackend(['{', '"bbbb"', 'ab', '"', ',', '"aa"', 'c"', ']']))
    assert text == '{"items":[{"kind":"bbbb","text":"ab"},{"kind":"aa","text":"c"}]}'
    assert accepts(Items, text)


def test_an_empty_list_is_one_choice():
    assert decode(Items, ScriptedBackend([']'])) == '{"items":[]}'


def test_min_items_are_not_optional_and_max_items_end_the_list():
    short = decode(TwoAtLeast, ScriptedBackend(['"aa"', 'a', '"', ']'], favourite='a'))
    assert accepts(TwoAtLeast, short) and short.count('{"kind"') >= 2
    long = decode(Items, ScriptedBackend([], favourite='a'))  # never wants to stop
    assert accepts(Items, long) and long.count('{"kind"') == 3


@pytest.mark.parametrize("schema,shortest", [(Items, '{"items":[]}'), (TwoAtLeast, None)])
def test_every_budget_from_the_shortest_output_up_ends_in_a_whole_object(schema, shortest):
    if shortest is None:
        shortest = '{"items":[{"kind":"aa","text":"a"},{"kind":"aa","text":"a"}]}'
    floor = len(ScriptedBackend([]).tokenize(shortest))
    for budget in range(floor, floor + 60):
        backend = ScriptedBackend([], favourite="a")
        dec = SchemaDecoder(backend, table(), 0.0, budget=budget)
        text = dec.decode(output_schema(schema))
        assert accepts(schema, text), (budget, text)
        assert len(backend.fed) + len(backend.tokenize(dec.pending)) <= budget


def test_a_one_value_nullable_enum_is_a_choice_not_a_free_string():
    # pydantic writes Literal["aa"] as {"const": "aa"}: the decoder must offer "aa" or null
    assert fast_supported(OneValue.model_json_schema())
    assert decode(OneValue, ScriptedBackend(['"aa"', '"'])) == '{"kind":"aa","text":""}'
    text = decode(OneValue, ScriptedBackend(['"bbbb"', '"'], favourite="null"))
    assert text == '{"kind":null,"text":""}' and accepts(OneValue, text)
