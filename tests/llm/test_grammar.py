"""Grammar generation: field order, bounds, refusals, and the structural check."""

from __future__ import annotations

import json
import re
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from appliance.agent.schemas import LLM_SCHEMAS, IntentClassification
from appliance.errors import SchemaNotSupported
from appliance.llm.grammar import (
    check_grammar,
    grammar_for,
    max_output_chars,
    output_schema,
)
from mcp_servers.contracts import ARG_SCHEMAS

ALL = list(LLM_SCHEMAS) + list(ARG_SCHEMAS.values())


@pytest.mark.parametrize("schema", ALL, ids=lambda s: s.__name__)
def test_every_schema_compiles_with_fields_in_declared_order(schema):
    text = grammar_for(schema)
    top = re.search(rf"^{re.escape(schema.__name__.lower())} ::= (.*)$", text, re.M).group(1)
    keys = re.findall(r'\\"([a-z_]+)\\":', top)
    assert keys == list(schema.model_fields)


def test_intent_decision_field_comes_first():
    text = grammar_for(IntentClassification)
    assert '"{\\"intent\\":"' in text


@pytest.mark.parametrize("schema", ALL, ids=lambda s: s.__name__)
def test_strings_exclude_control_characters_quotes_and_backslashes(schema):
    for line in grammar_for(schema).splitlines():
        if line.startswith(("char ::=", "first-char ::=")):
            assert "\\x00-\\x1f" in line or "\\x00-\\x20" in line
            assert '"\\\\' in line  # quote and backslash are in the negated class


class Defaulted(BaseModel):
    a: str
    b: str = "x"


class FreeDict(BaseModel):
    a: dict


class Patterned(BaseModel):
    a: str = Field(pattern=r"^\d+$")


class Unbounded(BaseModel):
    a: list[str]


@pytest.mark.parametrize("schema,words", [
    (Defaulted, "defaults"), (FreeDict, "free dicts"), (Patterned, "pattern"),
])
def test_unsafe_schemas_are_refused_with_a_clear_message(schema, words):
    with pytest.raises(SchemaNotSupported, match=words):
        grammar_for(schema)


@pytest.mark.parametrize("text,words", [
    ('root ::= missing\n', "undefined"),
    ('root ::= ( "a"\n', "unbalanced"),
    ('root ::= "a" )\n', "unbalanced"),
    ('other ::= "a"\n', "no root"),
    ('root ::= "a"\nroot ::= "b"\n', "twice"),
    ('root ::= "a" $\n', "malformed"),
])
def test_check_grammar_refuses_malformed_text(text, words):
    with pytest.raises(SchemaNotSupported, match=words):
        check_grammar(text)


def test_max_output_chars_bounds_the_longest_valid_object():
    class Small(BaseModel):
        kind: Literal["aa", "bbbb"]
        text: str = Field(min_length=1, max_length=5)
        maybe: str | None = Field(max_length=3)

    longest = {"kind": "bbbb", "text": "x" * 5, "maybe": "y" * 3}
    assert max_output_chars(Small) == len(json.dumps(longest, separators=(",", ":")))


def test_each_schema_is_derived_once_and_shared(monkeypatch):
    class Once(BaseModel):
        text: str = Field(max_length=5)

    calls = []
    original = Once.model_json_schema
    monkeypatch.setattr(Once, "model_json_schema", lambda *a, **k: calls.append(1) or original(*a, **k))
    derived = output_schema(Once)
    assert output_schema(Once) is derived and grammar_for(Once) == derived.grammar
    assert max_output_chars(Once) == len('{"text":""}') + 5
    assert calls == [1] and list(derived.json_schema["properties"]) == ["text"]


def test_an_unsafe_schema_is_refused_every_time():
    for _ in range(2):
        with pytest.raises(SchemaNotSupported, match="defaults"):
            output_schema(Defaulted)
