"""Eligibility criteria decided by code wherever the chart decides them (for a patient note: its
age and sex), before any model call, each decision citing the facts it rests on.

Invariants:
- Pure functions of the subject (``subject``), the criterion's text and type, and ``today`` (the
  day the prescreen reads the chart, passed in); no model, no I/O.
- Code decides only a criterion it reads whole: every word is part of a recognised part
  (``readers``: age, sex, pregnancy or breastfeeding; ``chart_readers``: a lab threshold, a
  listed condition, a current therapy) or a filler word, and the parts are joined all by "or" or
  all by "and". Anything else is the model's (``None``).
- One exception, inclusion criteria only: an explicit age bound, or a pregnancy the criterion
  opens with, that the patient fails makes the criterion fail when nothing in it offers an
  alternative, a condition or a negation ("Postmenopausal female, 55-75 years old" for a
  51-year-old; "Singleton pregnancy at 11 to 14 weeks" for a man).
- A criterion read whole that the chart cannot settle (a result too old or in another unit, no
  onset date, a "history of" on an active-only problem list) is decided *unknown* by code, and
  says why: the model reads the same facts and could only guess.
- From a note only age and sex are read (``NOTE_FAMILIES``).
"""

from __future__ import annotations

import re
from datetime import date

from appliance.prescreen.aggregate import (
    CriterionJudgement,
    CriterionType,
    standing_for,
)
from appliance.prescreen.chart_readers import read_conditions, read_labs, read_therapy
from appliance.prescreen.facts import PatientFacts
from appliance.prescreen.readers import (
    Outcome,
    Part,
    any_of,
    pregnancy_outcome,
    read_age,
    read_pregnancy,
    read_sex,
    sex_judge,
)
from appliance.prescreen.subject import Subject, from_facts, from_note

# Readers in the order they claim words: a lab's or a condition's "within 3 months" before an age
# bound could misread it, pregnancy's "women" before sex's.
READERS = (("lab", read_labs), ("condition", read_conditions), ("therapy", read_therapy),
           ("pregnancy", read_pregnancy), ("age", read_age), ("sex", read_sex))
CHART_FAMILIES = frozenset(f for f, _r in READERS)
NOTE_FAMILIES = frozenset({"age", "sex"})
# Changing what code decides changes the benchmark: ``trialgpt`` records this with every run.
RULES_VERSION = "decide-1"
FILLER = frozenset("""
    patient patients subject subjects participant participants individual individuals person persons people volunteer
    volunteers who are is be being must have has had the a an of at in on with known documented diagnosed diagnosis
    confirmed clinical clinically established physician-diagnosed doctor-diagnosed current currently active presence
    evidence sex gender any time screening enrollment enrolment consent informed form signing day inclusion study
    entry randomization randomisation baseline visit pre-existing preexisting existing underlying therapy treatment
    treated taking receiving prescribed using use stable dose dosing regimen only""".split())
HISTORY_WORDS = frozenset("history prior previous past ever formerly".split())
CONNECTORS = frozenset("or and and/or either both".split())
NO_PARTIAL = re.compile(r"\b(?:or|either|unless|except|if|when|must|should|who|not|non|no|without|negative|"
                        r"childbearing|potential|otherwise|for)\b|\bnon-|/")
PREGNANCY_OPENING = re.compile(r"^(?:(?:singleton|confirmed|ongoing|viable|intrauterine|current)\s+)*$")


def normalise(text: str) -> str:
    """Lowercase, symbols spelled as the readers expect, list numbering and end punctuation off."""
    t = str(text or "").lower()
    for a, b in (("≥", ">="), ("≤", "<="), ("=>", ">="), ("=<", "<="), ("–", "-"), ("—", "-"), ("²", "2"),
                 ("µ", "u"), ("μ", "u"), ("’", "'")):
        t = t.replace(a, b)
    t = re.sub(r"1\.73\s*m\^?2", "1.73m2", t)
    t = re.sub(r"^\s*(?:\d{1,3}[.)]|[-*•·]|\(?[a-z][.)])\s+", "", t)
    return " ".join(t.split()).strip(" .;:")


def read_parts(text: str, families: frozenset[str]) -> list[Part]:
    parts: list[Part] = []
    for family, reader in READERS:
        if family in families:
            parts += reader(text, parts)
    return sorted(parts, key=lambda p: p.start)


def _residual(text: str, parts: list[Part]) -> list[str]:
    """The words no part and no filler word accounts for."""
    chars = list(text)
    for p in parts:
        chars[p.start:p.end] = " " * (p.end - p.start)
    families = {p.family for p in parts}
    filler = FILLER | ({"adult", "adults"} if "age" in families else set())
    if "therapy" not in families:  # "prior insulin therapy" is no current therapy
        filler |= HISTORY_WORDS
    words = re.findall(r"[a-z0-9][a-z0-9'/+.-]*", "".join(chars))
    return [w for w in words if w.rstrip(".") not in filler and w not in CONNECTORS]


def _groups(parts: list[Part]) -> list[list[Part]]:
    """Judged parts in order; neighbouring sex parts are one ("male or female"), and so are
    neighbouring pregnancy parts ("pregnant or lactating")."""
    groups: list[list[Part]] = []
    for p in parts:
        if p.family == "filler":
            continue
        if groups and p.family in ("sex", "pregnancy") and groups[-1][0].family == p.family:
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups


def _judge_group(group: list[Part], subject: Subject, today: date) -> Outcome:
    if group[0].family == "sex":
        values = {p.value for p in group}
        return sex_judge("any" if "any" in values or len(values) > 1 else values.pop())(subject, today)
    if group[0].family == "pregnancy":
        return pregnancy_outcome([e for p in group for e in p.value.split("+")], subject)
    if len(group) == 1:
        return group[0].judge(subject, today)
    return any_of([p.judge(subject, today) for p in group])


def all_of(outcomes: list[Outcome]) -> Outcome:
    """Every one of several: fails when one fails, holds when all hold, else unknown."""
    failed = [o for o in outcomes if o.holds is False]
    if failed:
        return Outcome(False, tuple(dict.fromkeys(c for o in failed for c in o.cited)), " ".join(o.reason for o in failed))
    if all(o.holds is True for o in outcomes):
        return Outcome(True, tuple(dict.fromkeys(c for o in outcomes for c in o.cited)),
                       " ".join(dict.fromkeys(o.reason for o in outcomes)))
    return Outcome(None, tuple(dict.fromkeys(c for o in outcomes if o.holds is None for c in o.cited)),
                   " ".join(dict.fromkeys(o.reason for o in outcomes if o.holds is None and o.reason)))


def decide(subject: Subject, criterion_text: str, criterion_type: CriterionType, today: date,
           families: frozenset[str] = CHART_FAMILIES) -> Outcome | None:
    """Does the criterion's statement hold for the subject (an exclusion's: is its condition
    present)? None when code does not read the criterion (see the module docstring)."""
    text = normalise(criterion_text)
    if not text:
        return None
    parts = read_parts(text, families)
    groups = _groups(parts)
    if not groups:
        return None
    if not _residual(text, parts):
        joins = {"or" if re.search(r"\bor\b|/", text[a[-1].end:b[0].start]) else "and" for a, b in zip(groups, groups[1:])}
        if len(joins) > 1:
            return None
        outcomes = [_judge_group(g, subject, today) for g in groups]
        return any_of(outcomes) if joins == {"or"} else all_of(outcomes) if len(outcomes) > 1 else outcomes[0]
    if criterion_type != "inclusion" or NO_PARTIAL.search(text):
        return None
    for group in groups:
        first = group[0]
        opening = first.family == "pregnancy" and first.value == "pregnant" and PREGNANCY_OPENING.match(text[:first.start])
        if (first.family == "age" and first.explicit) or opening:
            outcome = _judge_group(group, subject, today)
            if outcome.holds is False:
                return Outcome(False, outcome.cited, outcome.reason + " The criterion requires it.")
    return None


def judgement(outcome: Outcome, criterion_text: str, criterion_type: CriterionType) -> CriterionJudgement:
    """Code's decision as the criterion's judgement (``judged_by: code``)."""
    answer = {True: "yes", False: "no", None: "unknown"}[outcome.holds]
    verdict, presence = standing_for(criterion_type, answer)
    return CriterionJudgement(" ".join(str(criterion_text).split()), criterion_type, verdict, presence,
                              tuple(dict.fromkeys(outcome.cited)), outcome.reason.strip()[:400], "code")


def decide_criterion(facts: PatientFacts, criterion_text: str, criterion_type: CriterionType,
                     today: date) -> CriterionJudgement | None:
    """A chart's criterion decided by code, or None for the model to judge."""
    outcome = decide(from_facts(facts, today), criterion_text, criterion_type, today)
    return None if outcome is None else judgement(outcome, criterion_text, criterion_type)


def decide_note(subject: Subject, criterion_text: str, criterion_type: CriterionType,
                today: date | None = None) -> CriterionJudgement | None:
    """A patient note's criterion decided from the note's age and sex, or None."""
    outcome = decide(subject, criterion_text, criterion_type, today or date.today(), NOTE_FAMILIES)
    return None if outcome is None else judgement(outcome, criterion_text, criterion_type)


__all__ = ["CHART_FAMILIES", "NOTE_FAMILIES", "RULES_VERSION", "all_of", "decide", "decide_criterion", "decide_note",
           "from_facts", "from_note", "judgement", "normalise"]
