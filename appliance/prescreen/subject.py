"""Who the criteria are decided about: the patient as code reads them, from the chart's key facts
or from a patient note.

Invariants:
- A ``Subject`` carries only what code read, each with the ids to cite: the age as a span of
  years (exact from a birth date, else the whole year "68" stands for), the sex, and for a chart
  the key facts themselves (problems, medications, labs, with the lists read whole).
- From a note only the age and sex are read ("A 58-year-old woman ..."), from the sentence
  that says them; a note that does not say them leaves them unread (None), never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from appliance.prescreen.facts import PatientFacts

YEAR_DAYS = 365.2425
AGE_UNITS = {"year": 1.0, "month": 1 / 12, "week": 7 / YEAR_DAYS, "day": 1 / YEAR_DAYS}


@dataclass(frozen=True)
class Subject:
    age: tuple[float, float] | None  # the age in years lies in [low, high)
    age_text: str | None  # as a clinician reads it ("68 years")
    age_cite: tuple[str, ...]
    sex: str | None  # "female" | "male" | None
    sex_cite: tuple[str, ...]
    facts: PatientFacts | None = None  # a chart's key facts (None for a note)
    source: str = "chart"  # "chart" | "note"


def _exact_age(born: str | None, today: date) -> float | None:
    try:
        birth = date.fromisoformat(str(born)[:10])
    except (TypeError, ValueError):
        return None
    return (today - birth).days / YEAR_DAYS if birth <= today else None


def from_facts(facts: PatientFacts, today: date) -> Subject:
    """The chart's patient: age from the birth date (else the recorded age), sex as recorded."""
    exact = _exact_age(facts.birth_date, today)
    if exact is not None:
        age = (exact, exact + 1 / YEAR_DAYS)
    elif isinstance(facts.age, int):
        age = (float(facts.age), facts.age + 1.0)
    else:
        age = None
    text = f"{int(age[0])} years" if age else None
    sex = facts.sex if facts.sex in ("female", "male") else None
    return Subject(age, text, ("D1",), sex, ("D2",), facts, "chart")


_NOTE_AGE = re.compile(r"\b(\d{1,3})[- ](year|month|week|day)s?[- ]old\b|\b(\d{1,3})\s*(?:yo|y/o|y\.o\.)(?!\w)"
                       r"|\baged? (\d{1,3})\b", re.I)
_FEMALE = re.compile(r"\b(woman|female|girl|lady|mother|wife|she|her)\b", re.I)
_MALE = re.compile(r"\b(man|male|boy|gentleman|father|husband|he|his|him)\b", re.I)
_PRONOUNS = {"she", "her", "he", "his", "him", "mother", "wife", "father", "husband"}
_SENTENCE = re.compile(r"(?m)^\s*(\d{1,3})\.\s+(.*)$")


def from_note(note_text: str) -> Subject:
    """A numbered patient note's age and sex, cited by sentence number (see the module docstring)."""
    sentences = [(m.group(1), m.group(2)) for m in _SENTENCE.finditer(note_text)]
    age = age_text = None
    age_cite: tuple[str, ...] = ()
    sex = None
    sex_cite: tuple[str, ...] = ()
    for sid, text in sentences[:3]:
        m = _NOTE_AGE.search(text)
        if not m:
            continue
        if m.group(1):
            n, unit = int(m.group(1)), m.group(2).lower()
        else:
            n, unit = int(m.group(3) or m.group(4)), "year"
        step = AGE_UNITS[unit]
        age, age_text, age_cite = (n * step, (n + 1) * step), f"{n} {unit}s", (sid,)
        # the sex noun that follows the age ("a 58-year-old African-American woman")
        female, male = _FEMALE.search(text, m.end()), _MALE.search(text, m.end())
        first = min((w for w in (female, male) if w and w.group(1).lower() not in _PRONOUNS),
                    key=lambda w: w.start(), default=None)
        if first is not None:
            sex, sex_cite = ("female" if first.re is _FEMALE else "male"), (sid,)
        break
    if sex is None:  # the pronouns of the whole note, when they all agree
        she = [sid for sid, t in sentences if _FEMALE.search(t)]
        he = [sid for sid, t in sentences if _MALE.search(t)]
        if len(she) >= 2 and not he:
            sex, sex_cite = "female", tuple(she[:2])
        elif len(he) >= 2 and not she:
            sex, sex_cite = "male", tuple(he[:2])
    return Subject(age, age_text, age_cite, sex, sex_cite, None, "note")


__all__ = ["AGE_UNITS", "Subject", "YEAR_DAYS", "from_facts", "from_note"]
