"""Fast schema-constrained decoding directly on llama.cpp's logits.

The output language is exactly the one ``appliance.llm.grammar`` describes (compact JSON,
declared field order, bounded strings without quotes, backslashes or control characters), but
instead of checking a grammar against the whole vocabulary at every step:

- text the schema fixes (braces, keys, punctuation) is fed to the model in one batch;
- an enum or nullable choice looks only at the logits of the allowed options' next tokens;
- a free string decodes unconstrained; the chosen token is checked first and the full
  vocabulary is masked only when it is rejected (a quote ends the string; anything unsafe or
  too long falls back to the best safe token).

Invariants: T=0 is greedy; T>0 samples from the temperature-scaled distribution restricted to
what is allowed at that step. Every finished output is one the schema's grammar accepts and is
validated by Pydantic before it is returned. The decoder never evaluates a token it then
rejects, so the KV cache always holds exactly the prompt plus the accepted output.

What it knows of the vocabulary (each token's text, which tokens may sit inside a string or
close one) is ``token_table.TokenTable``, built once per model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from pydantic import BaseModel

from appliance.llm.grammar import OutputSchema, output_chars, output_schema
from appliance.llm.token_table import TokenTable


@dataclass
class DecodeStats:
    fed_tokens: int = 0  # scaffolding and forced tokens evaluated in batches
    sampled_tokens: int = 0  # tokens chosen from logits
    model_steps: int = 0  # times the model's logits were read to decide (a close counts, unlike sampled_tokens)
    fallbacks: int = 0  # steps where the first choice was rejected and the vocabulary masked
    closed_early: int = 0  # strings closed by their maxLength or by the token budget
    eval_seconds: float = 0.0
    eval_calls: int = 0
    text: list[str] = field(default_factory=list)


class BudgetExceeded(Exception):
    """The output would need more tokens than the caller allowed."""


class Cancelled(Exception):
    """The caller's cancel event was set: decoding stopped before the next model step."""


class SchemaDecoder:
    """Walks a JSON schema, asking ``backend`` for logits and feeding it tokens.

    ``backend`` provides: ``logits() -> np.ndarray`` for the next position, ``feed(tokens)``,
    ``tokenize(text) -> list[int]`` (no BOS, no special tokens) and ``rng``.
    """

    def __init__(self, backend, table: TokenTable, temperature: float, budget: int | None = None, cancel=None):
        self.b = backend
        self.cancel = cancel  # a threading.Event checked before every model step
        self.budget = budget
        self.t = table
        self.temperature = temperature
        self.pending: str = ""  # literal text not yet fed
        self.out: list[str] = []
        self.stats = DecodeStats()

    # -- primitives ----------------------------------------------------------------------
    def literal(self, text: str) -> None:
        self.pending += text
        self.out.append(text)

    def _spend(self, n: int) -> None:
        used = self.stats.fed_tokens + self.stats.sampled_tokens + n
        if self.budget is not None and used > self.budget:
            raise BudgetExceeded(used)

    def _flush(self) -> None:
        if self.pending:
            tokens = self.b.tokenize(self.pending)
            self._spend(len(tokens))
            self.b.feed(tokens)
            self.stats.fed_tokens += len(tokens)
            self.pending = ""

    def _left(self) -> int | None:
        """Tokens the budget still allows, counting literal text not yet fed at one token a
        character (an upper bound: scaffolding is ASCII)."""
        if self.budget is None:
            return None
        return self.budget - self.stats.fed_tokens - self.stats.sampled_tokens - len(self.pending)

    def _affords(self, chars: int) -> bool:
        left = self._left()
        return left is None or left >= chars

    def _logits(self) -> np.ndarray:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled()
        self._flush()
        self.stats.model_steps += 1
        return self.b.logits()

    def _pick(self, logits: np.ndarray, candidates: np.ndarray) -> int:
        """Greedy or sampled choice among candidate token ids."""
        scores = logits[candidates]
        if self.temperature <= 0 or len(candidates) == 1:
            return int(candidates[int(np.argmax(scores))])
        scaled = (scores - scores.max()) / self.temperature
        probs = np.exp(scaled)
        probs /= probs.sum()
        return int(candidates[int(self.b.rng.choice(len(candidates), p=probs))])

    def _select(self, candidates: np.ndarray) -> int:
        """The model's choice among candidate next tokens (pending text fed first)."""
        logits = self._logits()
        return self._pick(logits, candidates) if len(candidates) > 1 else int(candidates[0])

    def _take(self, token: int) -> None:
        self._spend(1)
        self.b.feed([token])
        self.stats.sampled_tokens += 1

    # -- choices -------------------------------------------------------------------------
    def choose(self, options: list[str], tail: int = 0) -> str:
        """One of ``options`` (their exact JSON text), deciding only where they differ, among
        those that leave room in the budget for ``tail`` (the shortest when none does)."""
        seqs = {opt: self.b.tokenize(opt) for opt in options}
        left = self._left()
        alive = list(options)
        if left is not None:
            fitting = [o for o in options if len(seqs[o]) + tail <= left]
            alive = fitting or [min(options, key=lambda o: len(seqs[o]))]
        depth = 0
        while len(alive) > 1:
            done = [o for o in alive if len(seqs[o]) == depth]
            if done:  # an option that is a token-prefix of another: take the shorter
                alive = done[:1]
                break
            next_tokens = np.array(sorted({seqs[o][depth] for o in alive}), dtype=np.int64)
            token = self._select(next_tokens)
            self._take(token)
            alive = [o for o in alive if seqs[o][depth] == token]
            depth += 1
        chosen = alive[0]
        rest = seqs[chosen][depth:]
        self._flush()
        if rest:
            self._spend(len(rest))
            self.b.feed(rest)
            self.stats.fed_tokens += len(rest)
        self.out.append(chosen)
        return chosen

    def string_body(self, min_len: int, max_len: int, tail: int = 0) -> str:
        """The characters of a string after its opening quote, then the closing quote.

        ``tail`` is the most tokens the rest of the output can need once this string is closed;
        the string is closed early when one more token would leave too few for the quote and
        the tail, so a budget shorter than the longest output still ends in a whole object."""
        text: list[str] = []
        count = 0
        while True:
            remaining = max_len - count
            if remaining <= 0:
                self.stats.closed_early += 1
                break
            self._flush()
            if count >= min_len and not self._affords(2 + tail):
                self.stats.closed_early += 1
                break
            logits = self._logits()
            if self.temperature > 0:
                k = min(40, len(logits))
                top = np.argpartition(logits, -k)[-k:]
                first = self._pick(logits, top)
            else:
                first = int(np.argmax(logits))
            accepted = self._accept(first, count, min_len, remaining)
            if accepted is None:
                self.stats.fallbacks += 1
                first = self._fallback(logits, count, min_len, remaining)
                accepted = self._accept(first, count, min_len, remaining)
            kind, piece = accepted
            if kind == "close":
                if piece and count >= min_len and not self._affords(len(piece) + 1 + tail):
                    piece = ""  # the text glued to the quote would not fit the budget
                    self.stats.closed_early += 1
                if piece:
                    text.append(piece)
                    self.pending += piece
                break
            self._take(first)
            text.append(piece)
            count += len(piece)
        body = "".join(text)
        self.out.append(body)
        self.literal('"')
        return body

    def _fallback(self, logits: np.ndarray, count: int, min_len: int, remaining: int) -> int:
        """The best allowed token when the first choice was rejected: one masked pass."""
        t = self.t
        mask = t.safe & (t.lengths <= remaining)
        if count == 0:
            mask &= ~t.leading_space
        masked = np.where(mask, logits, -np.inf)
        if count >= min_len:
            masked[t.closers] = logits[t.closers]
        if self.temperature <= 0:
            return int(np.argmax(masked))
        k = min(40, len(masked))
        top = np.argpartition(masked, -k)[-k:]
        top = top[np.isfinite(masked[top])]
        return self._pick(masked, top)

    def _accept(self, token: int, count: int, min_len: int, remaining: int):
        """("char", piece) to take the token, ("close", before-quote) to end, or None."""
        t = self.t
        if t.safe[token] and t.lengths[token] <= remaining:
            if count == 0 and t.leading_space[token] and min_len > 0:
                return None
            return "char", t.pieces[token]
        before = t.quote_prefix[token]
        if before is not None and count + len(before) >= min_len and len(before) <= remaining:
            if count == 0 and before[:1].isspace() and min_len > 0:
                return None
            return "close", before
        return None

    # -- schema walk ---------------------------------------------------------------------
    def decode(self, schema: OutputSchema) -> str:
        """One whole output of ``schema`` (from ``output_schema``): its JSON text."""
        self.value(schema.json_schema, schema.defs)
        return "".join(self.out)

    def value(self, schema: dict, defs: dict, tail: int = 0) -> None:
        """Decode one value of ``schema``; ``tail`` bounds the tokens the output needs after it."""
        if "$ref" in schema:
            return self.value(defs[schema["$ref"].split("/")[-1]], defs, tail)
        if "anyOf" in schema:
            return self._any_of(schema["anyOf"], defs, tail)
        if "enum" in schema or "const" in schema:
            values = schema.get("enum", [schema.get("const")])
            self.choose([json.dumps(v, ensure_ascii=False) for v in values], tail)
            return None
        kind = schema.get("type")
        if kind == "object":
            self._object(schema, defs, tail)
        elif kind == "string":
            self.literal('"')
            self.string_body(int(schema.get("minLength", 0)), int(schema.get("maxLength", 2000)), tail)
        elif kind == "array":
            items = schema.get("items") or {}
            if (defs[items["$ref"].split("/")[-1]] if "$ref" in items else items).get("type") == "object":
                self._object_array(schema, defs, tail)
            else:
                self._string_array(schema, defs, tail)
        elif kind == "boolean":
            self.choose(["true", "false"], tail)
        elif kind == "null":
            self.literal("null")
        else:
            raise ValueError(f"the fast decoder does not handle {kind!r}")
        return None

    def _object(self, schema: dict, defs: dict, tail: int = 0, opened: bool = False) -> None:
        """One object, fields in declared order; ``opened``: its "{" is already out (an array
        item chosen by its opening brace)."""
        fields = list(schema["properties"].items())
        after = [0] * len(fields)  # chars after each field's value, up to and with "}"
        rest = 1 + tail
        for i in range(len(fields) - 1, -1, -1):
            after[i] = rest
            name, sub = fields[i]
            rest += len(("{" if i == 0 else ",") + json.dumps(name) + ":") + output_chars(sub, defs, longest=False)
        for i, (name, sub) in enumerate(fields):
            self.literal((("" if opened else "{") if i == 0 else ",") + json.dumps(name) + ":")
            self.value(sub, defs, after[i])
        self.literal("}")

    def _object_array(self, schema: dict, defs: dict, tail: int = 0) -> None:
        """An array of objects (each item's braces counted in its shortest form)."""
        items = schema.get("items") or {}
        if "$ref" in items:
            items = defs[items["$ref"].split("/")[-1]]
        shortest = output_chars(items, defs, longest=False)  # one item, its braces included
        self._array(schema, tail, "{", shortest, 1 + shortest,
                    lambda item_tail: self._object(items, defs, item_tail, opened=True))

    def _string_array(self, schema: dict, defs: dict, tail: int = 0) -> None:
        items = schema.get("items") or {}
        if "$ref" in items:
            items = defs[items["$ref"].split("/")[-1]]
        if items.get("type") != "string" or "enum" in items:
            raise ValueError("the fast decoder handles arrays of free strings only")
        lo_len, hi_len = int(items.get("minLength", 0)), int(items.get("maxLength", 2000))
        # an item after its opening quote: its shortest body and closing quote (+1 spare);
        # a required item still to come: its comma, both quotes and its shortest body
        self._array(schema, tail, '"', lo_len + 2, 3 + lo_len,
                    lambda item_tail: self.string_body(lo_len, hi_len, item_tail))

    def _array(self, schema: dict, tail: int, opening: str, afford_item: int, required_item: int,
               item: Callable[[int], None]) -> None:
        """A JSON array: past ``minItems`` each further item is a choice between its opening
        text and "]", made only while the budget still affords the item (``afford_item``
        characters after its opening, then "]" and the tail). ``item(tail)`` decodes one item
        after its opening text; ``tail`` counts the required items still to come
        (``required_item`` characters each), "]" and what follows the array."""
        lo, hi = int(schema.get("minItems", 0)), int(schema.get("maxItems", 16))
        self.literal("[")
        n = 0
        while n < hi:
            opener = opening if n == 0 else "," + opening
            if n >= lo:
                if not self._affords(len(opener) + afford_item + tail):
                    self.literal("]")
                    return
                if self.choose([opener, "]"], tail) == "]":
                    return
            else:
                self.literal(opener)
            item(max(0, lo - n - 1) * required_item + 1 + tail)
            n += 1
        self.literal("]")

    def _any_of(self, options: list[dict], defs: dict, tail: int = 0) -> None:
        """Nullable values: decide between ``null`` and the value by its first token."""
        non_null = [o for o in options if o.get("type") != "null"]
        if len(non_null) != 1 or len(options) != 2:
            raise ValueError("the fast decoder handles anyOf only as (value | null)")
        inner = non_null[0]
        if "$ref" in inner:
            inner = defs[inner["$ref"].split("/")[-1]]
        if "enum" in inner or "const" in inner:  # a one-value Literal is a "const"
            values = inner.get("enum", [inner.get("const")])
            self.choose([json.dumps(v, ensure_ascii=False) for v in values] + ["null"], tail)
        elif inner.get("type") == "string":
            lo, hi = int(inner.get("minLength", 0)), int(inner.get("maxLength", 2000))
            if not self._affords(2 + lo + tail):  # no room for a string: the value is null
                self.literal("null")
            elif self.choose(['"', "null"], tail) == '"':
                self.string_body(lo, hi, tail)
        else:
            raise ValueError("the fast decoder handles nullable strings and enums only")


@cache
def fast_handles(schema: type[BaseModel]) -> bool:
    """Whether SchemaDecoder handles ``schema`` (decided once per class). Raises
    SchemaNotSupported when the schema has no safe grammar at all."""
    return fast_supported(output_schema(schema).json_schema)


def fast_supported(json_schema: dict) -> bool:
    """Whether SchemaDecoder handles every node of the schema (else use the grammar path)."""
    defs = json_schema.get("$defs", {})

    def ok(node: dict) -> bool:
        if "$ref" in node:
            return ok(defs[node["$ref"].split("/")[-1]])
        if "anyOf" in node:
            opts = node["anyOf"]
            inner = [o for o in opts if o.get("type") != "null"]
            if len(opts) != 2 or len(inner) != 1:
                return False
            target = defs[inner[0]["$ref"].split("/")[-1]] if "$ref" in inner[0] else inner[0]
            return "enum" in target or "const" in target or target.get("type") == "string"
        if "enum" in node or "const" in node:
            return True
        kind = node.get("type")
        if kind == "object":
            return all(ok(v) for v in node.get("properties", {}).values())
        if kind == "array":
            items = node.get("items") or {}
            items = defs[items["$ref"].split("/")[-1]] if "$ref" in items else items
            if items.get("type") == "object":
                return ok(items)
            return items.get("type") == "string" and "enum" not in items
        return kind in ("string", "boolean", "null")

    return ok(json_schema)
