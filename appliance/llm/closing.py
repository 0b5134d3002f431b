"""Ending an output the token limit cut: what llama.cpp's server needs to close a string early.

The in-process decoder closes a free string when the budget is near (appliance.llm.fast). The
server's grammar sampler cannot look ahead, so a rambling model there stops mid-string at
``n_predict``. ``closing`` reads how far such a cut output got (``prefix``, a prefix of some
text the schema's grammar accepts) and gives a grammar for the shortest ways to end it: the
open string closed (at its minimum length), every field still to come with free strings empty
(or at their minimum), arrays at their fewest items. Choices (enums, booleans, nullable
alternatives) stay the model's: the grammar offers them all, so a second, short request to
the server continues from the cut with that grammar.

``closing_reserve`` bounds the characters any such ending takes (each token adds at least one),
so a caller that keeps that many tokens back stays within its budget overall.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache

from pydantic import BaseModel

from appliance.llm.grammar import (
    _CHAR,
    _FIRST_CHAR,
    _UNBOUNDED_STRING_CAP,
    OutputSchema,
    _raw,
    check_grammar,
    output_schema,
)

_NUMBER = re.compile(r"-?[0-9]*(\.[0-9]*)?")


@dataclass(frozen=True)
class Piece:
    """Part of an ending: GBNF text, the most characters it matches, and one text it matches."""

    gbnf: str
    longest: int
    example: str


@dataclass(frozen=True)
class Closing:
    grammar: str  # GBNF for the rest of the output after the prefix
    longest: int  # most characters the rest can take
    example: str  # one ending the grammar accepts (the shortest choices): prefix + example parses


class _Ends(Exception):
    """The prefix ends inside this value; ``pieces`` end it and every container around it."""

    def __init__(self, pieces: list[Piece]):
        self.pieces = pieces


class _Mismatch(Exception):
    """The prefix is not a prefix of anything the grammar accepts."""


def _lit(text: str) -> Piece:
    return Piece(_raw(text), len(text), text)


def _choice(options: list[str]) -> Piece:
    if len(options) == 1:
        return _lit(options[0])
    return Piece("(" + " | ".join(_raw(o) for o in options) + ")", max(map(len, options)), min(options, key=len))


def _string_end(have: int, lo: int) -> Piece:
    """The rest of a free string already ``have`` characters long: more only if below ``lo``."""
    need = max(0, lo - have)
    if need == 0:
        return _lit('"')
    first = f"[{_FIRST_CHAR[1:-1]}]" if have == 0 else f"[{_CHAR[1:-1]}]"
    parts = [first] + ([f"[{_CHAR[1:-1]}]{{{need - 1}}}"] if need > 1 else []) + ['"\\""']
    return Piece(" ".join(parts), need + 1, "x" * need + '"')


class _Walker:
    def __init__(self, defs: dict):
        self.defs = defs

    def resolve(self, schema: dict) -> dict:
        while "$ref" in schema:
            schema = self.defs[schema["$ref"].split("/")[-1]]
        return schema

    # -- the shortest whole value ------------------------------------------------------------
    def minimal(self, schema: dict) -> list[Piece]:
        schema = self.resolve(schema)
        if "anyOf" in schema:
            options = [self.minimal(option) for option in schema["anyOf"]]
            joined = [_join(o) for o in options]
            shortest = min(joined, key=lambda p: len(p.example))
            gbnf = "(" + " | ".join(f"({p.gbnf})" for p in joined) + ")"
            return [Piece(gbnf, max(p.longest for p in joined), shortest.example)]
        if "enum" in schema or "const" in schema:
            return [_choice([json.dumps(v, ensure_ascii=False) for v in schema.get("enum", [schema.get("const")])])]
        kind = schema.get("type")
        if kind == "object":
            pieces: list[Piece] = []
            for i, (name, sub) in enumerate(schema["properties"].items()):
                pieces.append(_lit(("{" if i == 0 else ",") + json.dumps(name) + ":"))
                pieces.extend(self.minimal(sub))
            return pieces + [_lit("}")]
        if kind == "string":
            return [_lit('"'), _string_end(0, int(schema.get("minLength", 0)))]
        if kind == "array":
            return [_lit("[")] + self._items_then_close(schema, have=0)
        if kind in ("integer", "number"):
            return [Piece("[0-9]", 1, "0")]
        if kind == "boolean":
            return [_choice(["true", "false"])]
        if kind == "null":
            return [_lit("null")]
        raise _Mismatch(f"unsupported schema {kind!r}")

    def worst(self, schema: dict) -> int:
        """Most characters ending this value can take, wherever in it (or before it) the cut is."""
        schema = self.resolve(schema)
        if "anyOf" in schema:
            return max(self.worst(option) for option in schema["anyOf"])
        kind = schema.get("type")
        if kind == "object":
            fields = list(schema["properties"].items())
            most = 0
            for i, (name, sub) in enumerate(fields):
                rest = _join(self._rest(fields[i + 1:])).longest
                key = len(json.dumps(name)) + 2
                start = key + _join(self.minimal(sub)).longest
                most = max(most, start + rest, self.worst(sub) + rest)
            return most
        if kind == "array":
            item = schema.get("items") or {}
            after_first = _join(self._items_then_close(schema, 1)).longest
            start = 1 + _join(self._items_then_close(schema, 0)).longest
            return max(start, self.worst(item) + after_first, 1 + _join(self.minimal(item)).longest + after_first)
        return _join(self.minimal(schema)).longest

    def _items_then_close(self, schema: dict, have: int) -> list[Piece]:
        pieces: list[Piece] = []
        for n in range(have, int(schema.get("minItems", 0))):
            if n:
                pieces.append(_lit(","))
            pieces.extend(self.minimal(schema.get("items") or {}))
        return pieces + [_lit("]")]

    # -- reading the prefix ------------------------------------------------------------------
    def value(self, schema: dict, text: str, pos: int) -> int:
        """Where the value starting at ``pos`` ends; raises _Ends if the text ends inside it."""
        schema = self.resolve(schema)
        if pos == len(text):
            raise _Ends(self.minimal(schema))
        if "anyOf" in schema:
            for option in schema["anyOf"]:
                try:
                    return self.value(option, text, pos)
                except _Mismatch:
                    continue
            raise _Mismatch("no alternative fits")
        if "enum" in schema or "const" in schema:
            return self._literal(text, pos, [json.dumps(v, ensure_ascii=False)
                                             for v in schema.get("enum", [schema.get("const")])])
        kind = schema.get("type")
        if kind == "object":
            return self._object(schema, text, pos)
        if kind == "string":
            return self._string(schema, text, pos)
        if kind == "array":
            return self._array(schema, text, pos)
        if kind == "boolean":
            return self._literal(text, pos, ["true", "false"])
        if kind == "null":
            return self._literal(text, pos, ["null"])
        if kind in ("integer", "number"):
            m = _NUMBER.match(text, pos)
            end = m.end()
            if end == pos or (kind == "integer" and "." in m.group(0)):
                raise _Mismatch("not a number")
            if end == len(text):  # a number is complete once it ends in a digit
                raise _Ends([] if text[-1].isdigit() else [Piece("[0-9]", 1, "0")])
            return end
        raise _Mismatch(f"unsupported schema {kind!r}")

    def _literal(self, text: str, pos: int, options: list[str]) -> int:
        rest = text[pos:]
        for option in options:
            if rest.startswith(option):
                return pos + len(option)
        started = [o[len(rest):] for o in options if o.startswith(rest)]
        if not started:
            raise _Mismatch("no literal fits")
        raise _Ends([_choice(started)])

    def _string(self, schema: dict, text: str, pos: int) -> int:
        if text[pos] != '"':
            raise _Mismatch("expected a string")
        end = text.find('"', pos + 1)
        if end >= 0:
            return end + 1
        have = len(text) - pos - 1
        hi = int(schema.get("maxLength", _UNBOUNDED_STRING_CAP))
        if have > hi:
            raise _Mismatch("string longer than its bound")
        raise _Ends([_string_end(have, int(schema.get("minLength", 0)))])

    def _object(self, schema: dict, text: str, pos: int) -> int:
        fields = list(schema["properties"].items())
        for i, (name, sub) in enumerate(fields):
            key = ("{" if i == 0 else ",") + json.dumps(name) + ":"
            got = text[pos:pos + len(key)]
            if not key.startswith(got):
                raise _Mismatch(f"expected {key!r}")
            rest = self._rest(fields[i + 1:])
            if len(got) < len(key):  # cut inside the key
                raise _Ends([_lit(key[len(got):])] + self.minimal(sub) + rest)
            try:
                pos = self.value(sub, text, pos + len(key))
            except _Ends as ends:
                raise _Ends(ends.pieces + rest) from None
        if pos == len(text):
            raise _Ends([_lit("}")])
        if text[pos] != "}":
            raise _Mismatch("expected '}'")
        return pos + 1

    def _rest(self, fields: list[tuple[str, dict]]) -> list[Piece]:
        pieces: list[Piece] = []
        for name, sub in fields:
            pieces.append(_lit("," + json.dumps(name) + ":"))
            pieces.extend(self.minimal(sub))
        return pieces + [_lit("}")]

    def _array(self, schema: dict, text: str, pos: int) -> int:
        if text[pos] != "[":
            raise _Mismatch("expected '['")
        pos += 1
        have = 0
        item = schema.get("items") or {}
        lo, hi = int(schema.get("minItems", 0)), int(schema.get("maxItems", 16))
        while True:
            if pos == len(text):  # after '[' or after an item
                raise _Ends(self._items_then_close(schema, have))
            if text[pos] == "]" and have >= lo:
                return pos + 1
            if have:
                if text[pos] != "," or have >= hi:
                    raise _Mismatch("expected ',' or ']'")
                pos += 1
                if pos == len(text):
                    raise _Ends(self.minimal(item) + self._items_then_close(schema, have + 1))
            try:
                pos = self.value(item, text, pos)
            except _Ends as ends:
                raise _Ends(ends.pieces + self._items_then_close(schema, have + 1)) from None
            have += 1


def _join(pieces: list[Piece]) -> Piece:
    pieces = [p for p in pieces if p.gbnf]
    if not pieces:
        return Piece('""', 0, "")
    return Piece(" ".join(p.gbnf for p in pieces), sum(p.longest for p in pieces), "".join(p.example for p in pieces))


def closing(derived: OutputSchema, prefix: str) -> Closing | None:
    """The grammar for ending ``prefix``, or None when it is complete already or no ending fits
    (it is not a prefix of the schema's language)."""
    walker = _Walker(derived.defs)
    try:
        walker.value(derived.json_schema, prefix, 0)
    except _Ends as ends:
        piece = _join(ends.pieces)
        grammar = f"root ::= {piece.gbnf}\n"
        check_grammar(grammar)
        return Closing(grammar, piece.longest, piece.example)
    except _Mismatch:
        return None
    return None  # whole already (or trailing text no grammar allows)


@cache
def closing_reserve(schema: type[BaseModel]) -> int:
    """Most characters an ending of ``schema``'s output can take, from any cut point, plus one
    for the end of the stream: a caller that keeps this many tokens back stays within its
    budget. Derived once per class (the server asks on every constrained call)."""
    derived = output_schema(schema)
    return _Walker(derived.defs).worst(derived.json_schema) + 1
