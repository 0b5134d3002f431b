"""The parts of a criterion code can read, each with how the chart settles it: an age bound,
a sex, pregnancy or breastfeeding, a lab threshold, a listed condition, a current therapy.

Invariants:
- A reader returns ``Part``s over spans of the normalised criterion (``decide.normalise``) that
  no earlier reader took; ``decide`` checks that the parts and filler words cover the whole
  criterion before it trusts them.
- A part's ``judge`` is a pure function of the ``Subject`` and ``today``: ``holds`` True or
  False with the fact ids it rests on, or None when the chart cannot settle it (no result, a
  result too old or in another unit, no onset date, a list not read whole), with the reason in
  clinical words.
- Absence is read only from a list the chart gave whole (``PatientFacts.complete``), and a
  "history of" a condition is never absent: the chart's problem list holds active problems only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta

from appliance.prescreen.subject import AGE_UNITS, YEAR_DAYS, Subject

DEFAULT_LAB_DAYS = 365  # a result older than this settles nothing, unless the criterion gives its own window


@dataclass(frozen=True)
class Outcome:
    holds: bool | None
    cited: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Part:
    start: int
    end: int
    family: str  # age | sex | pregnancy | lab | condition | therapy | filler
    judge: Callable[[Subject, date], Outcome] | None = field(default=None, compare=False)
    value: str = ""  # sex parts: female | male | any; pregnancy parts: the element
    explicit: bool = True  # age parts: said as an age ("aged", "years old"), not a bare count of years


def _free(spans: list[Part], start: int, end: int) -> bool:
    return all(end <= p.start or start >= p.end for p in spans)


_UNIT_WORDS = {"year": r"years?|yrs?", "month": r"months?|mos?", "week": r"weeks?|wks?", "day": r"days?"}


def _unit(word: str | None) -> str | None:
    """"years" -> "year", "mo" -> "month"; anything else None."""
    word = (word or "").strip().lower()
    return next((unit for unit, pattern in _UNIT_WORDS.items() if re.fullmatch(pattern, word)), None)


def _days(n: float, unit: str) -> timedelta:
    return timedelta(days=round(n * AGE_UNITS[unit] * YEAR_DAYS))


def _ids(facts: list) -> tuple[str, ...]:
    return tuple(f.id for f in facts)


def _none_fact(subject: Subject, prefix: str) -> tuple[str, ...]:
    return (f"{prefix}0",) if f"{prefix}0" in subject.facts.ids() else ()


# -- age ---------------------------------------------------------------------------------------
N = r"(\d{1,3}(?:\.\d+)?)"
U = r"(?:\s*(years?|yrs?|months?|mos?|weeks?|wks?|days?)\b)?"
TAIL = r"(?:\s*(?:old|of\s+age))?"
PRE = r"(?:\bage[sd]?\b\s*(?:of\s+|:\s*|=\s*)?(?:the\s+age\s+of\s+)?)?(?:from\s+|between\s+)?"
LOWER = r"(?:>=|>|at\s+least|over|above|older\s+than|greater\s+than|more\s+than|no\s+(?:less|younger)\s+than|" \
        r"not\s+younger\s+than|minimum(?:\s+age)?(?:\s+of)?)"
UPPER = r"(?:<=|<|under|below|younger\s+than|less\s+than|up\s+to|no\s+(?:more|older)\s+than|not\s+older\s+than|" \
        r"at\s+most|maximum(?:\s+age)?(?:\s+of)?)"
_AGE = [  # (pattern, what the numbers bound)
    (re.compile(rf"{PRE}({LOWER})\s*{N}{U}\s*(?:-|to|and)\s*({UPPER})\s*{N}{U}{TAIL}"), "both"),
    (re.compile(rf"{PRE}{N}{U}\s*(?:-|to|and|through)\s*{N}{U}{TAIL}"), "range"),
    (re.compile(rf"{PRE}({LOWER})\s*(?:the\s+age\s+of\s+)?{N}{U}{TAIL}"), "lower"),
    (re.compile(rf"{PRE}({UPPER})\s*(?:the\s+age\s+of\s+)?{N}{U}{TAIL}"), "upper"),
    (re.compile(rf"{PRE}{N}{U}{TAIL}\s*(?:(?:or|and)\s+(?:older|over|above|greater|more|upwards)|\+|and\s+up)"),
     "lower"),
    (re.compile(rf"{PRE}{N}{U}{TAIL}\s*(?:or|and)\s+(?:younger|under|below|less)"), "upper"),
]


STRICT_UPPER = {"<", "under", "below", "younger than", "less than"}


def _age_judge(lo: float | None, hi_limit: float | None, phrase: str):
    """In range when the patient's age span lies wholly at or above ``lo`` and below ``hi_limit``
    (an inclusive upper bound "up to 65" takes every 65-year-old: the limit is 66)."""
    def judge(subject: Subject, today: date) -> Outcome:
        if subject.age is None:
            return Outcome(None, (), "The patient's age is not recorded.")
        low, high = subject.age
        verdicts = []
        if lo is not None:
            verdicts.append(True if low >= lo else False if high <= lo else None)
        if hi_limit is not None:
            verdicts.append(True if high <= hi_limit else False if low >= hi_limit else None)
        holds = False if False in verdicts else None if None in verdicts else True
        return Outcome(holds, subject.age_cite, f"The patient is {subject.age_text} old (criterion: {phrase}).")
    return judge


def read_age(text: str, taken: list[Part]) -> list[Part]:
    parts: list[Part] = []
    for pattern, shape in _AGE:
        for m in pattern.finditer(text):
            if not _free(taken + parts, m.start(), m.end()):
                continue
            groups = list(m.groups())
            nums = [(float(g), _unit(groups[i + 1])) for i, g in enumerate(groups[:-1])
                    if g and re.fullmatch(r"[\d.]+", g)]
            ops = [" ".join(g.split()) for g in groups if g and not re.fullmatch(r"[\d.]+", g) and not _unit(g)]
            said = re.search(r"\bage|\bold\b|of\s+age", m.group(0)) is not None
            if not said and not any(u for _n, u in nums):
                continue  # a bare number is no age
            unit = next((u for _n, u in reversed(nums) if u), "year")
            bounds = [n * AGE_UNITS[u or unit] for n, u in nums]
            step = AGE_UNITS[nums[-1][1] or unit]
            phrase = " ".join(m.group(0).split())
            if shape in ("both", "range"):
                strict = shape == "both" and ops[-1] in STRICT_UPPER
                judge = _age_judge(bounds[0], bounds[1] + (0 if strict else step), phrase)
            elif shape == "lower":
                judge = _age_judge(bounds[0], None, phrase)
            else:  # "under 18": below 18; "up to 65", "65 or younger": every 65-year-old too
                strict = bool(ops) and ops[0] in STRICT_UPPER
                judge = _age_judge(None, bounds[0] + (0 if strict else step), phrase)
            parts.append(Part(m.start(), m.end(), "age", judge, explicit=said))
    return parts


# -- sex ---------------------------------------------------------------------------------------
FEMALE = re.compile(r"\b(?:wom[ae]n|females?|girls?|ladies|lady)\b")
MALE = re.compile(r"\b(?:m[ae]n|males?|boys?|gentlem[ae]n)\b")
ANY_SEX = re.compile(r"\b(?:both|either|any|all)\s+(?:sex(?:es)?|genders?)\b")


def sex_judge(value: str):
    def judge(subject: Subject, today: date) -> Outcome:
        if value == "any":
            return Outcome(True, subject.sex_cite if subject.sex else (), "Open to either sex.")
        if subject.sex is None:
            return Outcome(None, (), "The patient's sex is not recorded as female or male.")
        return Outcome(subject.sex == value, subject.sex_cite, f"The patient is {subject.sex}.")
    return judge


def read_sex(text: str, taken: list[Part]) -> list[Part]:
    parts = []
    for pattern, value in ((ANY_SEX, "any"), (FEMALE, "female"), (MALE, "male")):
        for m in pattern.finditer(text):
            if _free(taken + parts, m.start(), m.end()):
                parts.append(Part(m.start(), m.end(), "sex", sex_judge(value), value))
    return parts


# -- pregnancy and breastfeeding ---------------------------------------------------------------
_NEGATED = re.compile(r"(?:\bnon-?|\bnot\s+|\bno\s+)$")
_PREGNANCY = [
    (re.compile(r"\b(?:current|existing)\s+(?:or|and/or)\s+(?:planned|intended)\s+pregnancy\b"), "pregnant+plan"),
    (re.compile(r"\b(?:planned|planning|intended|intending|desire|desires|wish(?:es|ing)?|want(?:s|ing)?|plans?|"
                r"intends?)\s+(?:to\s+(?:become|get)\s+pregnant|(?:a\s+)?pregnancy|to\s+conceive)"
                r"(?:\s+(?:within|during|in)\s+the\s+(?:next|study|coming)(?:\s+\d+)?(?:\s+(?:years?|months?|period))?)?"),
     "plan"),
    (re.compile(r"\b(?:a\s+)?positive\s+(?:urine\s+|serum\s+)?pregnancy\s+test\b"), "test"),
    (re.compile(r"\bpregnan(?:t|cy)\b(?:\s+as\s+confirmed\s+by\s+(?:a\s+)?(?:positive\s+)?(?:urine\s+|serum\s+)?"
                r"pregnancy\s+test(?:\s+at\s+(?:the\s+)?time\s+of\s+screening)?)?"), "pregnant"),
    (re.compile(r"\bbreast[- ]?feed(?:ing)?\b|\blactat(?:ing|ion)\b|\bnursing(?:\s+mothers?)?\b"), "breastfeeding"),
]
_ON_LIST = {"pregnant": re.compile(r"pregnan", re.I), "breastfeeding": re.compile(r"lactat|breast ?feed|nursing", re.I)}
_WORDS = {"pregnant": "pregnancy", "breastfeeding": "breastfeeding", "plan": "a planned pregnancy",
          "test": "a positive pregnancy test"}


def _element(element: str, subject: Subject) -> Outcome:
    if subject.sex == "male":
        return Outcome(False, subject.sex_cite, f"The patient is male: {_WORDS[element]} does not apply.")
    facts = subject.facts
    if facts is None:
        return Outcome(None, (), "")
    listed = [f for f in facts.of_kind("problem") if element in _ON_LIST
              and _ON_LIST[element].search(str(f.data.get("display") or ""))]
    pregnant = [f for f in facts.of_kind("problem") if _ON_LIST["pregnant"].search(str(f.data.get("display") or ""))]
    if listed:
        return Outcome(True, _ids(listed), f"{listed[0].data.get('display')} is on the problem list.")
    if element == "test" and pregnant:
        return Outcome(True, _ids(pregnant), f"{pregnant[0].data.get('display')} is on the problem list.")
    if element in _ON_LIST and subject.sex == "female" and "problem" in facts.complete:
        read = _ids(facts.of_kind("problem")) or _none_fact(subject, "P")
        return Outcome(False, subject.sex_cite + read, f"{_WORDS[element].capitalize()}: not on the problem list.")
    return Outcome(None, (), f"The chart does not record {_WORDS[element]}.")


def _pregnancy_judge(elements: tuple[str, ...]):
    def judge(subject: Subject, today: date) -> Outcome:
        return pregnancy_outcome(list(elements), subject)
    return judge


def pregnancy_outcome(elements: list[str], subject: Subject) -> Outcome:
    """Either of the elements ("pregnancy or breastfeeding"), said once for a man."""
    if subject.sex == "male":
        words = " or ".join(dict.fromkeys(_WORDS[e] for e in elements))
        return Outcome(False, subject.sex_cite, f"The patient is male: {words} does not apply.")
    return any_of([_element(e, subject) for e in elements])


def read_pregnancy(text: str, taken: list[Part]) -> list[Part]:
    parts: list[Part] = []
    for pattern, element in _PREGNANCY:
        for m in pattern.finditer(text):
            if _free(taken + parts, m.start(), m.end()) and not _NEGATED.search(text[:m.start()]):
                elements = tuple(element.split("+"))
                parts.append(Part(m.start(), m.end(), "pregnancy", _pregnancy_judge(elements), element))
    if parts:  # "pregnant or lactating women": the women are the pregnancy's, not a second requirement
        parts += [Part(m.start(), m.end(), "filler") for m in FEMALE.finditer(text) if _free(taken + parts, m.start(), m.end())]
    return parts


def any_of(outcomes: list[Outcome]) -> Outcome:
    """Either of several: holds when one holds, fails when all fail, else unknown."""
    yes = [o for o in outcomes if o.holds is True]
    if yes:
        return Outcome(True, tuple(dict.fromkeys(c for o in yes for c in o.cited)), " ".join(o.reason for o in yes))
    if all(o.holds is False for o in outcomes):
        return Outcome(False, tuple(dict.fromkeys(c for o in outcomes for c in o.cited)),
                       " ".join(dict.fromkeys(o.reason for o in outcomes)))
    return Outcome(None, (), " ".join(dict.fromkeys(o.reason for o in outcomes if o.holds is None and o.reason)))
