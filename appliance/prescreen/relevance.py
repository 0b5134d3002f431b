"""Does a cited chart fact concern the criterion at all? Code's check on every model judgement.

A weak model answers "excluded" and cites whatever fact comes first ("Pregnancy or breastfeeding
- no active allergies recorded"). Its judgement may rest only on facts that concern the
criterion; a judgement left with none becomes unknown (``judge.judge``).

Invariants (a pure function of the fact and the criterion's text):
- By kind first: the age (D1) concerns only criteria that speak of age; the sex (D2) only those
  about sex, pregnancy, breastfeeding, contraception and the like; an allergy only criteria
  about allergy or intolerance, and when the criterion names what to ("aspirin allergy"), only
  an allergy to that; a "none recorded" fact (P0, M0, A0, L0, V0) only criteria of its
  own kind (a condition, a therapy, an allergy, a lab, a vital sign).
- A problem, medication, lab or vital sign concerns a criterion when both name the same
  condition, drug class or analyte (``vocab``), share a topic (``vocab.TOPICS``: eGFR and
  "kidney", insulin and "diabetes"), or share a specific word (not one of ``vocab.GENERIC``).
- ``supports`` adds the direction a fact can point: a "none recorded" fact shows only that
  something is absent, a recorded allergy only that it is present, the sex only that a
  criterion about the other sex does not apply (being female shows no pregnancy), and the age
  only what the criterion's own age bound says of it (a 68-year-old is no reason to fail "any
  patient 18 to 99 year old with ..."; an age with no bound code can read shows nothing), and a
  problem shows a condition present only when it names the criterion's kind of condition
  (``vocab.CONDITION_KINDS``: chronic kidney disease is no "kidney transplant") or is the same
  concept. A fact cited for the other direction does not support the answer.
"""

from __future__ import annotations

import re

from appliance.prescreen import vocab
from appliance.prescreen.decide import normalise
from appliance.prescreen.facts import Fact

_AGE = re.compile(vocab.AGE_WORDS)
_SEX = re.compile(vocab.SEX_WORDS)
_ALLERGY = re.compile(vocab.ALLERGY_WORDS)
_MEDICATION = re.compile(vocab.MEDICATION_WORDS)
_LAB = re.compile(vocab.LAB_WORDS)
_VITAL = re.compile(vocab.VITAL_WORDS)
_LIFE = re.compile(vocab.LIFE_WORDS)
_CONDITION = re.compile(r"diseas|disorder|histor|diagnos|syndrome|condition|infection|cancer|transplant|failure|"
                        r"injur|surgery|malignan|illness|comorbid|insufficien|impairment|dysfunction")
_TOPICS = {name: (re.compile(c), re.compile(f, re.I)) for name, (c, f) in vocab.TOPICS.items()}
_KINDS = re.compile(vocab.CONDITION_KINDS)
_WORD = re.compile(r"[a-z][a-z0-9'-]{3,}")


def _stems(text: str) -> set[str]:
    return {w[:6] for w in _WORD.findall(text.lower()) if w not in vocab.GENERIC}


_NAMED_BEFORE = re.compile(r"([a-z][\w-]*)\s+(?:allerg\w*|hypersensitivit\w*|intoleran\w*)")
_NAMED_AFTER = re.compile(r"(?:allerg\w*|hypersensitiv\w*|intoleran\w*|sensitivity)\s+(?:reactions?\s+)?to\s+(?:any\s+|the\s+)?"
                          r"([a-z][\w-]*)")
_ANY_ALLERGEN = frozenset("""known drug drugs study any medication medications component components excipient excipients
    product products agent agents severe history food foods other serious of or and a an the documented prior previous
    investigational trial active significant""".split())


def _allergen_named(criterion: str, substance: str) -> bool:
    """Whether the allergy criterion is about this substance, or about no substance in particular."""
    named = {w for rx in (_NAMED_BEFORE, _NAMED_AFTER) for w in rx.findall(criterion)} - _ANY_ALLERGEN
    return not named or bool({w[:6] for w in named} & _stems(substance))


def _subject_words(fact: Fact) -> str:
    """What the fact is about, from the chart row (not the fact's framing words)."""
    data = fact.data or {}
    if fact.kind == "problem":
        return str(data.get("display") or "")
    if fact.kind == "medication":
        return str(data.get("medication_name") or "")
    if fact.kind == "allergy":
        return str(data.get("substance") or "")
    return str(data.get("display") or fact.text)


def _named_alike(fact: Fact, words: str, criterion: str) -> bool:
    if fact.kind == "problem":
        code = str((fact.data or {}).get("snomed_code") or "")
        return any(c.criterion.search(criterion) and (code in c.snomed or c.display.search(words)) for c in vocab.CONCEPTS)
    if fact.kind == "medication":
        return any(d.criterion.search(criterion) and d.member.search(words) for d in vocab.DRUG_CLASSES)
    if fact.kind in ("lab", "vital"):
        loinc = str((fact.data or {}).get("loinc_code") or "")
        return any(a.criterion.search(criterion) and (loinc in a.loinc or a.display.search(words)) for a in vocab.ANALYTES)
    return False


def concerns(fact: Fact, criterion_text: str) -> bool:
    """Whether ``fact`` concerns the criterion (see the module docstring)."""
    criterion, kind, words = normalise(criterion_text), fact.kind, _subject_words(fact)
    none_fact = kind != "demographics" and fact.data is None
    if kind == "demographics":
        return bool({"D1": _AGE, "D2": _SEX, "D3": _LIFE}.get(fact.id, _LIFE).search(criterion))
    if kind == "allergy":
        return bool(_ALLERGY.search(criterion)) and (none_fact or _allergen_named(criterion, words))
    if none_fact:
        if kind == "problem":
            return bool(_CONDITION.search(criterion) or any(c.criterion.search(criterion) for c in vocab.CONCEPTS)
                        or any(t.search(criterion) for t, _f in _TOPICS.values()))
        return bool({"medication": _MEDICATION, "lab": _LAB, "vital": _VITAL}[kind].search(criterion)
                    or kind == "medication" and any(d.criterion.search(criterion) for d in vocab.DRUG_CLASSES)
                    or kind == "lab" and any(a.criterion.search(criterion) for a in vocab.ANALYTES))
    if _named_alike(fact, words, criterion):
        return True
    if any(c.search(criterion) and f.search(words) for c, f in _TOPICS.values()):
        return True
    return bool(_stems(words) & _stems(criterion))



NEGATED = re.compile(r"\b(?:no|not|without|never|none|absence\s+of|free\s+of)\b|\bnon-")
CONDITIONAL = re.compile(r"\b(?:must|if|should|agrees?|willing|unless|when|who\s+(?:are|is)\s+of)\b")
FEMALE_TOPIC = re.compile(r"wom[ae]n|\bfemales?\b|pregnan|breast|lactat|child-?bearing|menopaus|menstrua|gestation|"
                          r"\bovar|\buter|\bcervi")
MALE_TOPIC = re.compile(r"\bm[ae]n\b|\bmales?\b|sperm|prostat|testic|condom")


def _age_points(fact: Fact, criterion: str, holds: bool) -> bool:
    """Whether the criterion's explicit age bounds, applied to the recorded age, point the way
    the answer does."""
    from datetime import date

    from appliance.prescreen.readers import read_age
    from appliance.prescreen.subject import Subject

    age = (fact.data or {}).get("age")
    parts = [p for p in read_age(criterion, []) if p.explicit]
    if not isinstance(age, int) or not parts:
        return False
    subject = Subject((float(age), age + 1.0), f"{age} years", ("D1",), None, ())
    outcomes = [p.judge(subject, date.today()).holds for p in parts]
    return (False not in outcomes and True in outcomes) if holds else False in outcomes


def supports(fact: Fact, criterion_text: str, criterion_type: str, answer: str) -> bool:
    """Whether ``fact`` can support ``answer`` ("yes": the criterion's statement holds -- an
    inclusion met, an exclusion's condition present; "no": it does not). See the module
    docstring."""
    if answer not in ("yes", "no") or not concerns(fact, criterion_text):
        return False
    criterion = normalise(criterion_text)
    holds = answer == "yes"
    negated = bool(NEGATED.search(criterion))
    if fact.kind != "demographics" and fact.data is None:  # "none recorded": an absence
        return holds == negated
    if fact.kind == "allergy":  # a recorded allergy: a presence
        return holds != negated
    if fact.kind == "problem" and holds != negated:  # the condition shown present
        kinds = set(_KINDS.findall(criterion))
        words = _subject_words(fact).lower()
        if kinds and not kinds & set(_KINDS.findall(words)) and not _named_alike(fact, words, criterion):
            return False
    if fact.id == "D1":
        return _age_points(fact, criterion, holds)
    if fact.id == "D2":
        sex = str((fact.data or {}).get("sex") or "").lower()
        other = (FEMALE_TOPIC.search(criterion) and not MALE_TOPIC.search(criterion) and sex == "male") or \
                (MALE_TOPIC.search(criterion) and not FEMALE_TOPIC.search(criterion) and sex == "female")
        # "does not apply": the statement is false. An inclusion that binds one sex only if it
        # applies ("women of childbearing potential must ...") is not failed by the other sex.
        return bool(other) and not holds and not negated and (criterion_type == "exclusion"
                                                               or not CONDITIONAL.search(criterion))
    return True


__all__ = ["concerns", "supports"]
