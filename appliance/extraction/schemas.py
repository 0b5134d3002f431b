"""The extraction pipeline's constrained-output schemas and its result records.

Invariants:
- Model schemas follow docs/design.md §6: decision-critical fields first, every field
  required, nullable where it may be empty, strings bounded. Every one is a schema the fast
  decoder handles (``appliance.llm.fast.fast_handles``): no numbers and no lists of objects,
  so numeric thresholds come back as short strings ("<= 75 years") that ``parse_threshold``
  turns into value, unit and comparator in code.
- A result ``Criterion`` holds only what code has checked: thresholds whose number appears in
  the criterion's text, a triplet whose entity's words do, a temporal phrase drawn from it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

CriterionType = Literal["inclusion", "exclusion"]
Assertion = Literal["present", "absent", "hypothetical", "historical", "conditional"]
Category = Literal["demographic", "condition", "medication", "procedure", "lab_value", "vital_sign",
                   "reproductive", "lifestyle", "consent", "other"]
# The fixed relation set of a triplet: entity RELATION value.
Relation = Literal["has", "has_not", "equals", "greater_than", "greater_or_equal", "less_than", "less_or_equal",
                   "between", "within", "other"]
Comparator = Literal["<", "<=", ">", ">=", "=", "!="]


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PageFilter(_Schema):
    """Stage 1: does this page hold eligibility criteria?"""

    holds_criteria: bool


class ParagraphFilter(_Schema):
    """Stage 2: is this paragraph itself eligibility criteria (not background or procedures)?"""

    holds_criteria: bool


class AtomicSplit(_Schema):
    """Stage 3a: one passage as its atomic criteria, each in the passage's own words."""

    criteria: list[Annotated[str, Field(min_length=3, max_length=300)]] = Field(min_length=1, max_length=8)


class CriterionDetails(_Schema):
    """Stage 3b: one atomic criterion's attributes."""

    type: CriterionType
    assertion: Assertion
    category: Category
    entity: str = Field(min_length=1, max_length=80, description="the clinical thing the criterion is about")
    relation: Relation
    value: str | None = Field(max_length=60)
    unit: str | None = Field(max_length=30)
    thresholds: list[Annotated[str, Field(min_length=1, max_length=40)]] = Field(
        max_length=3, description='numeric limits as comparator, number, unit: ">= 18 years"')
    temporal: str | None = Field(max_length=80, description='a time window in the text: "within 4 weeks"')


# -- results ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Threshold:
    comparator: Comparator
    value: float
    unit: str | None

    def to_json(self) -> dict:
        value: float | int = int(self.value) if self.value.is_integer() else self.value
        return {"comparator": self.comparator, "value": value, "unit": self.unit}


@dataclass(frozen=True)
class Triplet:
    entity: str
    relation: str
    value: str | None
    unit: str | None


@dataclass
class Criterion:
    text: str
    type: CriterionType | None  # None only when neither a heading nor the model gave a side
    category: str | None
    assertion: str | None
    thresholds: list[Threshold]
    temporal: str | None
    triplets: list[Triplet]
    document: str
    page: int
    provenance: dict[str, str]  # which path produced what: code shortcut or model, per stage
    grounding: dict | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        out = {
            "text": self.text, "type": self.type, "category": self.category, "assertion": self.assertion,
            "thresholds": [t.to_json() for t in self.thresholds], "temporal": self.temporal,
            "triplets": [asdict(t) for t in self.triplets], "document": self.document, "page": self.page,
            "provenance": dict(self.provenance),
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if self.grounding is not None:
            out["grounding"] = self.grounding
        return out


# -- thresholds as strings, parsed by code ------------------------------------------------
_NUMBER = r"(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
_WORDS: tuple[tuple[str, Comparator], ...] = (
    ("greater than or equal to", ">="), ("less than or equal to", "<="), ("more than or equal to", ">="),
    ("at least", ">="), ("no less than", ">="), ("not less than", ">="), ("minimum", ">="), ("min", ">="),
    ("or more", ">="), ("or older", ">="), ("and over", ">="), ("or above", ">="),
    ("at most", "<="), ("no more than", "<="), ("not more than", "<="), ("up to", "<="), ("maximum", "<="),
    ("max", "<="), ("or less", "<="), ("or younger", "<="), ("or below", "<="),
    ("greater than", ">"), ("more than", ">"), ("higher than", ">"), ("above", ">"), ("over", ">"),
    ("exceeding", ">"), ("older than", ">"),
    ("less than", "<"), ("fewer than", "<"), ("lower than", "<"), ("below", "<"), ("under", "<"),
    ("younger than", "<"), ("equal to", "="), ("equals", "="), ("not equal to", "!="),
)
_SYMBOLS: dict[str, Comparator] = {
    ">=": ">=", "=>": ">=", "\u2265": ">=", "<=": "<=", "=<": "<=", "\u2264": "<=", ">": ">", "<": "<",
    "=": "=", "==": "=", "!=": "!=", "\u2260": "!=",
}


def parse_threshold(text: str) -> Threshold | None:
    """``">= 18 years"``, ``"at least 1,500/mm3"``, ``"18 years or older"`` -> a Threshold;
    None when the string has no comparator or no number."""
    s = " ".join(text.strip().lower().split())
    comparator: Comparator | None = None
    m = re.search(r"(>=|=>|<=|=<|!=|==|[\u2265\u2264\u2260<>=])", s)
    if m:
        comparator = _SYMBOLS[m.group(1)]
        s = (s[:m.start()] + " " + s[m.end():]).strip()
    else:
        for words, comp in _WORDS:
            pattern = rf"(?<![a-z]){re.escape(words)}(?![a-z])"
            if re.search(pattern, s):
                comparator = comp
                s = re.sub(pattern, " ", s, count=1).strip()
                break
    n = re.search(_NUMBER, s)
    if comparator is None or n is None:
        return None
    value = float(n.group(1).replace(",", "") + ("." + n.group(2) if n.group(2) else ""))
    return Threshold(comparator, value, _unit(s[n.end():]))


def _unit(rest: str) -> str | None:
    """The unit after a number: a short phrase with a letter, %, / or µ; "inclusive" dropped."""
    unit = re.sub(r"\s+(?:inclusive|exclusive)$", "", rest.strip(" .,;:()")).strip() or None
    if unit is None or len(unit) > 30 or not re.search(r"[a-z%/\u00b5^]", unit):
        return None
    return unit


def number_in(text: str, value: float) -> bool:
    """Whether ``value`` is written in ``text`` (1,500 and 1500 alike)."""
    for m in re.finditer(_NUMBER, text):
        found = float(m.group(1).replace(",", "") + ("." + m.group(2) if m.group(2) else ""))
        if found == value:
            return True
    return False


_RANGE = re.compile(rf"(?:between\s+|from\s+)?{_NUMBER}\s*(?:-|\u2013|to|and)\s*{_NUMBER}\s*(?P<unit>[^\s,;()]*(?:\s[a-z]+)?)", re.I)


def parse_thresholds(text: str) -> list[Threshold]:
    """One threshold string as thresholds: a range ("between 19 and 36 kg/m2", "18-75 years")
    is two (>= low, <= high); anything else is ``parse_threshold``'s one, or none."""
    one = parse_threshold(text)
    if one is not None:
        return [one]
    m = _RANGE.search(text.lower())
    if m is None:
        return []
    low = float(m.group(1).replace(",", "") + ("." + m.group(2) if m.group(2) else ""))
    high = float(m.group(3).replace(",", "") + ("." + m.group(4) if m.group(4) else ""))
    unit = _unit(m.group("unit"))
    return [Threshold(">=", low, unit), Threshold("<=", high, unit)] if low <= high else []
