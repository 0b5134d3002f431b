"""GBNF grammars built from Pydantic schemas.

Invariants:
- Fields appear in the schema's declared order (docs/design.md §6: critical-first) and every field
  is required: a schema with a defaulted (optional-to-emit) field is refused, because order
  and presence are what the grammar enforces.
- Output is compact JSON (no free whitespace, so no whitespace runaway).
- Strings never contain control characters, quotes or backslashes (so no escapes: clinical
  text loses nothing it needs, and every character of output is one grammar step). A required
  string cannot start with whitespace, and ``max_length`` bounds it.
- ``max_output_chars`` bounds the length of any output the grammar accepts; since each
  generated token adds at least one character, it is also a bound on generated tokens.
- Only a whitelisted subset of JSON Schema is translated (objects, strings, string enums,
  integers, numbers, booleans, arrays, nullable unions, $ref). Anything else raises
  ``SchemaNotSupported`` before llama.cpp sees it, and every grammar is checked for undefined
  rules and unbalanced groups by ``check_grammar`` because llama.cpp crashes on a malformed one.
- ``output_schema`` is the one place a Pydantic output model becomes a JSON schema and a
  grammar, once per class: the runtime, both decoders, image findings, batches and the tests
  all read the same derivation, so what is decoded, checked and validated cannot differ.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache

from pydantic import BaseModel

from appliance.errors import SchemaNotSupported

# Characters allowed inside a JSON string: anything but quote, backslash, control characters.
_CHAR = r'[^"\\\x00-\x1f]'
_FIRST_CHAR = r'[^"\\\x00-\x20]'
_UNBOUNDED_STRING_CAP = 2000  # a cap even when the schema gives none


def _literal(value: str) -> str:
    """A GBNF literal matching the JSON encoding of ``value``."""
    return _raw(json.dumps(value, ensure_ascii=False))


class _Builder:
    def __init__(self, defs: dict):
        self.defs = defs
        self.rules: dict[str, str] = {}
        self._names: dict[str, int] = {}

    def add(self, hint: str, body: str) -> str:
        for name, existing in self.rules.items():
            if existing == body:
                return name
        base = re.sub(r"[^a-zA-Z0-9]+", "-", hint).strip("-").lower() or "r"
        n = self._names.get(base, 0)
        self._names[base] = n + 1
        name = base if n == 0 else f"{base}-{n}"
        self.rules[name] = body
        return name

    def visit(self, schema: dict, hint: str) -> str:
        if "$ref" in schema:
            ref = schema["$ref"]
            if not ref.startswith("#/$defs/"):
                raise SchemaNotSupported(f"{hint}: only local $ref is supported, got {ref!r}")
            return self.visit(self.defs[ref.split("/")[-1]], hint)
        if "anyOf" in schema:
            options = schema["anyOf"]
            rules = [self.visit(option, f"{hint}-opt") for option in options]
            return self.add(hint, " | ".join(rules))
        if "enum" in schema or "const" in schema:
            values = schema.get("enum", [schema.get("const")])
            if not all(isinstance(v, str) for v in values) or not values:
                raise SchemaNotSupported(f"{hint}: only string enums are supported")
            return self.add(hint, " | ".join(_literal(v) for v in values))
        kind = schema.get("type")
        if kind == "object":
            return self._object(schema, hint)
        if kind == "string":
            return self._string(schema, hint)
        if kind == "array":
            return self._array(schema, hint)
        if kind == "integer":
            return self.add("integer", '"-"? [0-9]{1,15}')
        if kind == "number":
            return self.add("number", '"-"? [0-9]{1,15} ("." [0-9]{1,10})?')
        if kind == "boolean":
            return self.add("boolean", '"true" | "false"')
        if kind == "null":
            return self.add("null", '"null"')
        raise SchemaNotSupported(f"{hint}: unsupported schema {json.dumps(schema)[:120]}")

    def _object(self, schema: dict, hint: str) -> str:
        props: dict = schema.get("properties") or {}
        if not props:
            raise SchemaNotSupported(f"{hint}: objects need declared properties (free dicts are not allowed)")
        required = set(schema.get("required", []))
        missing = [name for name in props if name not in required]
        if missing:
            raise SchemaNotSupported(
                f"{hint}: fields {missing} have defaults; make them required (nullable if they may be empty)"
            )
        parts = []
        for i, (name, sub) in enumerate(props.items()):
            key = ("{" if i == 0 else ",") + json.dumps(name) + ":"
            parts.append(_raw(key))
            parts.append(self.visit(sub, f"{hint}-{name}"))
        parts.append('"}"')
        return self.add(hint, " ".join(parts))

    def _string(self, schema: dict, hint: str) -> str:
        if "format" in schema or "pattern" in schema:
            raise SchemaNotSupported(f"{hint}: string format/pattern constraints are not supported")
        lo = int(schema.get("minLength", 0))
        hi = int(schema.get("maxLength", _UNBOUNDED_STRING_CAP))
        if hi < lo or hi > _UNBOUNDED_STRING_CAP:
            raise SchemaNotSupported(f"{hint}: maxLength must be between minLength and {_UNBOUNDED_STRING_CAP}")
        char = self.add("char", _CHAR)
        if lo == 0:
            body = f'"\\"" {char}{{0,{hi}}} "\\""'
        else:
            first = self.add("first-char", _FIRST_CHAR)
            body = f'"\\"" {first} {char}{{{lo - 1},{hi - 1}}} "\\""'
        return self.add(f"string-{lo}-{hi}", body)

    def _array(self, schema: dict, hint: str) -> str:
        item = self.visit(schema.get("items") or {}, f"{hint}-item")
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", 16))
        if hi < max(lo, 1) or hi > 64:
            raise SchemaNotSupported(f"{hint}: arrays need maxItems between max(minItems, 1) and 64")
        if lo == 0:
            body = f'"[" ({item} ("," {item}){{0,{hi - 1}}})? "]"'
        else:
            body = f'"[" {item} ("," {item}){{{lo - 1},{hi - 1}}} "]"'
        return self.add(hint, body)


def _raw(text: str) -> str:
    """GBNF literal for raw output text (already JSON)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class OutputSchema:
    """A Pydantic output model's JSON schema and its checked GBNF grammar (``output_schema``)."""

    model: type[BaseModel]
    json_schema: dict  # shared by every caller: read it, never change it
    grammar: str

    @property
    def defs(self) -> dict:
        return self.json_schema.get("$defs", {})


@cache
def output_schema(model: type[BaseModel]) -> OutputSchema:
    """The JSON schema and grammar of ``model``, derived once per class. Raises
    SchemaNotSupported (not cached) when the schema has no safe grammar."""
    json_schema = model.model_json_schema()
    return OutputSchema(model, json_schema, grammar_from_json_schema(json_schema, model.__name__))


def grammar_for(schema: type[BaseModel]) -> str:
    """The GBNF text for a Pydantic model. Raises SchemaNotSupported."""
    return output_schema(schema).grammar


def grammar_from_json_schema(json_schema: dict, name: str = "root") -> str:
    builder = _Builder(json_schema.get("$defs", {}))
    top = builder.visit(json_schema, name)
    lines = [f"root ::= {top}"] + [f"{rule} ::= {body}" for rule, body in builder.rules.items()]
    text = "\n".join(lines) + "\n"
    check_grammar(text)
    return text


@cache
def string_body_grammar(lo: int, hi: int, *, start: bool = True) -> str:
    """GBNF for ``lo`` to ``hi`` more characters of a string and then its closing quote, as the
    fast decoder takes them (no DEL; no leading space when ``lo`` > 0 at the string's ``start``):
    the segment a clinic host's server decodes for a free string (``server_decoding``)."""
    char = _CHAR[:-1] + r"\x7f]"
    first = _FIRST_CHAR[:-1] + r"\x7f]" if start else char
    body = f"{char}{{0,{hi}}}" if lo == 0 else f"{first} {char}{{{lo - 1},{hi - 1}}}"
    text = f'root ::= {body} "\\""\n'
    check_grammar(text)
    return text


_TOKEN = re.compile(
    r'\s+|"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|\{\d+(?:,\d*)?\}|::=|[a-zA-Z][a-zA-Z0-9-]*|[()|?*+]'
)


def check_grammar(text: str) -> None:
    """Refuse a grammar with undefined rules, stray characters or unbalanced parentheses."""
    defined: set[str] = set()
    used: set[str] = set()
    for line in text.strip().splitlines():
        head, sep, body = line.partition(" ::= ")
        if not sep or not re.fullmatch(r"[a-z][a-z0-9-]*", head):
            raise SchemaNotSupported(f"malformed grammar line: {line[:80]!r}")
        if head in defined:
            raise SchemaNotSupported(f"grammar rule defined twice: {head}")
        defined.add(head)
        depth, pos = 0, 0
        while pos < len(body):
            m = _TOKEN.match(body, pos)
            if not m:
                raise SchemaNotSupported(f"malformed grammar near {body[pos:pos + 30]!r}")
            tok = m.group(0)
            if tok == "(":
                depth += 1
            elif tok == ")":
                depth -= 1
                if depth < 0:
                    raise SchemaNotSupported(f"unbalanced ')' in rule {head}")
            elif re.fullmatch(r"[a-zA-Z][a-zA-Z0-9-]*", tok):
                used.add(tok)
            pos = m.end()
        if depth:
            raise SchemaNotSupported(f"unbalanced '(' in rule {head}")
    if "root" not in defined:
        raise SchemaNotSupported("grammar has no root rule")
    undefined = used - defined
    if undefined:
        raise SchemaNotSupported(f"grammar uses undefined rules: {sorted(undefined)}")


def max_output_chars(schema: type[BaseModel]) -> int:
    """Longest output (in characters) the schema's grammar accepts."""
    derived = output_schema(schema)
    return output_chars(derived.json_schema, derived.defs, longest=True)


def token_budget(schema: type[BaseModel], seed_limit: int, *, whole: bool = False) -> int:
    """A constrained call's token limit: the node's number (docs/design.md §7).

    The fast decoder ends the object within it, closing free strings early when the limit is
    near, so a rambling model costs at most this many tokens. ``whole=True`` raises the limit
    to the longest output the grammar accepts (every token adds at least one character), for
    text that must never be cut: a clinician's dictated note.
    """
    return max(seed_limit, max_output_chars(schema) + 1) if whole else seed_limit


def min_output_chars(schema: type[BaseModel]) -> int:
    """Shortest output (in characters) the schema's grammar accepts."""
    derived = output_schema(schema)
    return output_chars(derived.json_schema, derived.defs, longest=False)


def output_chars(schema: dict, defs: dict, *, longest: bool) -> int:
    """Characters of the longest (or shortest) compact JSON text the grammar accepts for
    ``schema``: the bound on tokens of a whole output, or what the rest of one still needs."""
    pick = max if longest else min
    if "$ref" in schema:
        return output_chars(defs[schema["$ref"].split("/")[-1]], defs, longest=longest)
    if "anyOf" in schema:
        return pick(output_chars(option, defs, longest=longest) for option in schema["anyOf"])
    if "enum" in schema or "const" in schema:
        return pick(len(json.dumps(v, ensure_ascii=False)) for v in schema.get("enum", [schema.get("const")]))
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        fields = sum(len(json.dumps(k)) + 1 + output_chars(v, defs, longest=longest) for k, v in props.items())
        return 2 + fields + max(0, len(props) - 1)  # braces, "key": value, commas between
    if kind == "string":
        return 2 + (int(schema.get("maxLength", _UNBOUNDED_STRING_CAP)) if longest else int(schema.get("minLength", 0)))
    if kind == "array":
        n = int(schema.get("maxItems", 16)) if longest else int(schema.get("minItems", 0))
        return 2 + n * output_chars(schema.get("items") or {}, defs, longest=longest) + max(0, n - 1)
    if longest:
        return {"integer": 16, "number": 27, "boolean": 5, "null": 4}[kind]
    return {"integer": 1, "number": 1, "boolean": 4, "null": 4}[kind]


def accepts(schema: type[BaseModel], text: str) -> bool:
    """Whether ``text`` is in the language of ``grammar_for(schema)``: the reference check
    the decoders are tested against (compact JSON, declared field order, safe bounded strings)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return False
    if json.dumps(data, ensure_ascii=False, separators=(",", ":")) != text:
        return False  # not compact, or keys out of declared order are caught below
    derived = output_schema(schema)
    return _accepts(data, derived.json_schema, derived.defs)


def _accepts(value, schema: dict, defs: dict) -> bool:
    if "$ref" in schema:
        return _accepts(value, defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        return any(_accepts(value, option, defs) for option in schema["anyOf"])
    if "enum" in schema or "const" in schema:
        return value in schema.get("enum", [schema.get("const")])
    kind = schema.get("type")
    if kind == "object":
        return isinstance(value, dict) and list(value) == list(schema["properties"]) and all(
            _accepts(value[k], sub, defs) for k, sub in schema["properties"].items()
        )
    if kind == "string":
        if not isinstance(value, str) or re.search(r'["\\\x00-\x1f]', value):
            return False
        lo, hi = int(schema.get("minLength", 0)), int(schema.get("maxLength", _UNBOUNDED_STRING_CAP))
        if lo > 0 and value[:1].isspace():
            return False
        return lo <= len(value) <= hi
    if kind == "array":
        lo, hi = int(schema.get("minItems", 0)), int(schema.get("maxItems", 16))
        return isinstance(value, list) and lo <= len(value) <= hi and all(
            _accepts(v, schema.get("items") or {}, defs) for v in value
        )
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return False
