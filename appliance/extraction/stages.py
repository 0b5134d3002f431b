"""The pipeline's model calls: prompt, schema, temperature and token limit per stage, and
code's checks of what the model returned (seed 001's stages, docs/design.md §16).

Invariants:
- Each call is one constrained generation at T=0 through ``LanguageModel.generate_constrained``
  with a schema from ``appliance.extraction.schemas``; the text in a prompt was sized by the
  caller (``appliance.extraction.chunking``) to fit the context with the stage's ``MAX_TOKENS``.
- What the model says is checked against the text before it is kept: split pieces must be the
  passage's own words, thresholds' numbers and a temporal phrase must be in the criterion, a
  triplet's entity must be named in it. Code's knowledge (a heading's side) wins over the model's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from appliance.extraction.schemas import (
    AtomicSplit,
    CriterionDetails,
    PageFilter,
    ParagraphFilter,
    Threshold,
    Triplet,
    number_in,
    parse_thresholds,
)
from appliance.llm.base import LanguageModel
from appliance.llm.prompt import Message

TEMPERATURE = 0.0
PAGE_NODE, PARAGRAPH_NODE, SPLIT_NODE, DETAILS_NODE = (
    "EXTRACT_PAGE_FILTER", "EXTRACT_PARAGRAPH_FILTER", "EXTRACT_SPLIT", "EXTRACT_DETAILS")
FILTER_MAX_TOKENS = 16
DETAILS_MAX_TOKENS = 200

PAGE_PROMPT = """You read one page of a clinical trial protocol. Say whether the page lists eligibility
criteria: the conditions a patient must meet (inclusion) or must not meet (exclusion) to join the
trial. Background, objectives, treatment, procedures, schedules and statistics are not eligibility
criteria. Answer with JSON only."""

PARAGRAPH_PROMPT = """You read one paragraph of a clinical trial protocol. Say whether the paragraph itself
states eligibility criteria: conditions a patient must meet or must not meet to join the trial.
Background, objectives, treatment, procedures and schedules are not. Answer with JSON only."""

SPLIT_PROMPT = """You split a passage of a clinical trial's eligibility criteria into atomic criteria.
Each atomic criterion is one condition, copied in the passage's own words, with its numbers, units
and time window. Never add words the passage does not contain. A passage that is already one
condition is returned as one criterion. Answer with JSON only."""

DETAILS_PROMPT = """You describe one eligibility criterion of a clinical trial.
- type: inclusion (the patient must meet it) or exclusion (meeting it excludes the patient)
- assertion: present, absent (the condition must not be there), hypothetical, historical (in the
  past), or conditional (applies only in some case)
- category: demographic, condition, medication, procedure, lab_value, vital_sign, reproductive,
  lifestyle, consent or other
- entity, relation, value, unit: the criterion as "entity relation value", e.g. "age
  greater_or_equal 18 years", "pleural effusion has unilateral"
- thresholds: each numeric limit as comparator, number and unit, e.g. ">= 18 years", "< 50000 /mm3"
- temporal: the time window in the criterion's words, e.g. "within 4 weeks", or null
Use only what the criterion says. Answer with JSON only."""


def page_messages(text: str, number: int) -> list[Message]:
    return [Message("system", PAGE_PROMPT), Message("user", f"Page {number}:\n{text}")]


def paragraph_messages(text: str, heading: str | None) -> list[Message]:
    return [Message("system", PARAGRAPH_PROMPT),
            Message("user", f"Heading above it: {heading or 'none'}\nParagraph:\n{text}")]


def split_messages(text: str, side: str | None) -> list[Message]:
    return [Message("system", SPLIT_PROMPT), Message("user", f"Section: {_section(side)}\nPassage: {text}")]


def details_messages(text: str, side: str | None) -> list[Message]:
    return [Message("system", DETAILS_PROMPT), Message("user", f"Section: {_section(side)}\nCriterion: {text}")]


def _section(side: str | None) -> str:
    return {"inclusion": "inclusion criteria", "exclusion": "exclusion criteria"}.get(side or "", "not stated")


SPLIT_COPIES, SPLIT_OVERHEAD = 2, 48


def split_max_tokens(passage_tokens: int) -> int:
    """The split call copies the passage (allowed twice its length, as the pieces may
    tokenize differently) plus the JSON around it."""
    return SPLIT_COPIES * passage_tokens + SPLIT_OVERHEAD


# -- calls --------------------------------------------------------------------------------
def page_holds_criteria(model: LanguageModel, text: str, number: int) -> bool:
    out = model.generate_constrained(PAGE_NODE, page_messages(text, number), PageFilter,
                                     temperature=TEMPERATURE, max_tokens=FILTER_MAX_TOKENS)
    return out.holds_criteria


def paragraph_holds_criteria(model: LanguageModel, text: str, heading: str | None) -> bool:
    out = model.generate_constrained(PARAGRAPH_NODE, paragraph_messages(text, heading), ParagraphFilter,
                                     temperature=TEMPERATURE, max_tokens=FILTER_MAX_TOKENS)
    return out.holds_criteria


def split_passage(model: LanguageModel, text: str, side: str | None, passage_tokens: int) -> tuple[list[str], str]:
    """The passage's atomic criteria and how they were decided: ``model`` when the model's
    pieces pass code's checks, ``passage`` (the whole passage as one) when they do not."""
    out = model.generate_constrained(SPLIT_NODE, split_messages(text, side), AtomicSplit,
                                     temperature=TEMPERATURE, max_tokens=split_max_tokens(passage_tokens))
    return checked_pieces(text, out.criteria)


def checked_pieces(passage: str, pieces: list[str]) -> tuple[list[str], str]:
    """Keep the pieces that are the passage's own words: a run of at least 3 of its words, in
    its order, not inside another kept piece. When the kept pieces leave more than 20 % of the
    passage's words out, the passage is kept whole instead, so a split never loses a condition
    (the small model often returns fragments)."""
    flat = " ".join(passage.split())
    words = tokens(flat)
    run = " " + " ".join(words) + " "
    kept: list[str] = []
    for piece in pieces:
        piece = " ".join(piece.split()).strip(" ;,")
        t = tokens(piece)
        if len(t) < 3 or f" {' '.join(t)} " not in run:
            continue
        if any(f" {' '.join(t)} " in f" {' '.join(tokens(k))} " for k in kept):
            continue
        kept = [k for k in kept if f" {' '.join(tokens(k))} " not in f" {' '.join(t)} "] + [piece]
    covered = set().union(*(set(tokens(p)) for p in kept)) if kept else set()
    if len(kept) < 2 or len(covered & set(words)) < 0.8 * len(set(words)):
        return [flat], "passage"
    return kept, "model"


@dataclass
class Details:
    type: str
    category: str
    assertion: str
    thresholds: list[Threshold]
    temporal: str | None
    triplets: list[Triplet]
    dropped: list[str]  # what the model said that the text does not support


def describe(model: LanguageModel, text: str, side: str | None) -> Details:
    out = model.generate_constrained(DETAILS_NODE, details_messages(text, side), CriterionDetails,
                                     temperature=TEMPERATURE, max_tokens=DETAILS_MAX_TOKENS)
    return checked_details(text, out)


def checked_details(text: str, out: CriterionDetails) -> Details:
    dropped: list[str] = []
    thresholds: list[Threshold] = []
    for raw in out.thresholds:
        parsed = parse_thresholds(raw)
        if parsed and all(number_in(text, t.value) for t in parsed):
            thresholds += [t for t in parsed if t not in thresholds]
        else:
            dropped.append(f"threshold {raw!r}")
    for t in thresholds_in_text(text):
        same = [i for i, k in enumerate(thresholds) if t.value == k.value and t.comparator == k.comparator]
        if not same:
            thresholds.append(t)
        elif thresholds[same[0]].unit is None and t.unit is not None:
            thresholds[same[0]] = t  # the model left the unit out; the text has it
    temporal = out.temporal
    if temporal is not None and not _drawn_from(temporal, text, 0.6):
        dropped.append(f"temporal {temporal!r}")
        temporal = None
    temporal = temporal or temporal_in_text(text)
    triplets: list[Triplet] = []
    if _drawn_from(out.entity, text, 0.5):
        value = out.value if out.value is not None and _drawn_from(out.value, text, 0.5) else None
        unit = out.unit if out.unit is not None and _drawn_from(out.unit, text, 0.5) else None
        triplets.append(Triplet(out.entity, out.relation, value, unit))
    else:
        dropped.append(f"entity {out.entity!r}")
    return Details(out.type, out.category, out.assertion, thresholds, temporal, triplets, dropped)


# -- text checks --------------------------------------------------------------------------
_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")


def tokens(text: str) -> list[str]:
    """Lower-case words and numbers (1,500 -> 1500): the unit of every text comparison."""
    return _WORD.findall(re.sub(r"(?<=\d),(?=\d{3})", "", text.lower()))


def _drawn_from(phrase: str, text: str, share: float) -> bool:
    words = tokens(phrase)
    have = set(tokens(text))
    return bool(words) and sum(w in have for w in words) / len(words) >= share


_UNIT = (r"(?:years?|yrs?|months?|weeks?|days?|hours?|minutes?|seconds?|%|mg/dl|g/dl|mmol/l|[\u00b5u]mol/l|ml/min(?:/1\.73\s?m2)?|"
         r"kg/m2|kg/m\^2|/mm\^?3|/[\u00b5u]l|x\s?10\^?9/l|mmhg|bpm|kg|cm|times)")
_COMPARE = (r"(?P<cmp>>=|<=|\u2265|\u2264|>|<|at least|no more than|more than|greater than|less than|"
            r"fewer than|up to|above|below|over|under)")
_IN_TEXT = re.compile(rf"{_COMPARE}\s*(?P<num>\d{{1,3}}(?:,\d{{3}})+|\d+(?:\.\d+)?)\s*(?P<unit>{_UNIT})?(?![a-z])", re.I)
_AND_OVER = re.compile(rf"(?P<num>\d+)\s*(?P<unit>{_UNIT})?\s+(?:and over|or older|or more|and older)", re.I)
_TIME = r"\d+\s+(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?)"
_ANCHOR = r"\s+(?:of|prior to|before|after|since|from)(?:\s+(?:the\s+)?(?!(?:and|or|no|not)\b)[a-z\-]+){1,3}"
_TEMPORAL = re.compile(rf"\b(?:within|in the (?:past|last)|during the (?:past|last))\s+(?:the\s+)?(?:past\s+|last\s+)?"
                       rf"{_TIME}(?:{_ANCHOR})?|\b{_TIME}{_ANCHOR}", re.I)


_RANGE_IN_TEXT = re.compile(rf"(?<![\w.,])(?:(?P<between>between)\s+)?(?P<low>\d+(?:\.\d+)?)\s*(?(between)and|(?:-|\u2013|to))\s*"
                            rf"(?P<high>\d+(?:\.\d+)?)\s*(?P<unit>{_UNIT})?(?![\w-])", re.I)


def thresholds_in_text(text: str) -> list[Threshold]:
    """Comparator-number(-unit) phrases the text writes out ("\u2265 18 years", "at least
    1,500/mm^3", "18 and over"): found by code whatever the model said."""
    out: list[Threshold] = []
    for m in _IN_TEXT.finditer(text):
        out += [t for t in parse_thresholds(f"{m.group('cmp')} {m.group('num')} {m.group('unit') or ''}")
                if t not in out]
    for m in _RANGE_IN_TEXT.finditer(text):
        low, high = float(m.group("low")), float(m.group("high"))
        if low < high:
            unit = m.group("unit")
            out += [t for t in (Threshold(">=", low, unit), Threshold("<=", high, unit)) if t not in out]
    for m in _AND_OVER.finditer(text):
        t = Threshold(">=", float(m.group("num")), m.group("unit"))
        if t not in out:
            out.append(t)
    return out


def temporal_in_text(text: str) -> str | None:
    m = _TEMPORAL.search(text)
    return m.group(0).strip() if m else None
