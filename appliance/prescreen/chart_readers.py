"""The parts of a criterion that only a chart settles: a lab threshold with its unit and date, a
listed condition with its onset, a current therapy. (The parts any patient description settles,
age and sex, and pregnancy are in ``readers``; the invariants there hold here.)

Invariants:
- A lab decides only from the latest result of that analyte, in the criterion's unit (or the
  analyte's usual unit when the criterion gives none), dated within the criterion's window (or
  ``DEFAULT_LAB_DAYS``); otherwise the part is unknown and says why.
- A condition is present when a problem on the list carries its SNOMED code or its name; with
  "within the last N months" or "for at least N months" the onset date decides, and a problem
  without an onset date leaves it unknown.
- A therapy is current when an *active* medication order is in the class; an order on hold or a
  draft leaves it unknown.
"""

from __future__ import annotations

import re
from datetime import date

from appliance.prescreen import vocab
from appliance.prescreen.readers import (
    DEFAULT_LAB_DAYS,
    N,
    Outcome,
    Part,
    _days,
    _free,
    _ids,
    _none_fact,
    _unit,
)
from appliance.prescreen.subject import Subject

UNIT = r"(years?|months?|weeks?|days?)"
WINDOW = re.compile(rf"\s*(?:,\s*)?(?:measured\s+|obtained\s+|performed\s+|done\s+|diagnosed\s+|first\s+diagnosed\s+|"
                    rf"onset\s+)?(?:within|in)\s+(?:the\s+)?(?:(?:last|past|previous|preceding|prior)\s+)?"
                    rf"(?:{N}\s*)?{UNIT}(?:\s+(?:before|prior\s+to)\s+(?:screening|enrol?ment|randomi[sz]ation|inclusion))?")
AT_LEAST = re.compile(rf"\s*(?:,\s*)?(?:(?:diagnosed|present|known)\s+)?(?:for|of)\s+(?:at\s+least|more\s+than|over|>=|>|"
                      rf"a\s+minimum\s+of)\s+{N}\s*{UNIT}(?:'?s?\s+duration)?|\s*(?:diagnosed\s+)?(?:more\s+than|over|"
                      rf"at\s+least|>=|>)\s+{N}\s*{UNIT}\s+ago")
LAB_UNIT = r"(%|mg/dl|mmol/mol|mmol/l|meq/l|g/dl|g/l|mg/g|mg/mmol|ml/min/1\.73m2|ml/min|u/l|iu/l|miu/l|uiu/ml|kg/m2|" \
           r"(?:x\s?)?10\^?[39]/u?l|k/ul)"
OPS = {"<": "lt", "below": "lt", "under": "lt", "less than": "lt", "lower than": "lt", "<=": "le", "at most": "le",
       "no more than": "le", "not more than": "le", "up to": "le", "maximum of": "le", ">": "gt", "above": "gt",
       "over": "gt", "greater than": "gt", "more than": "gt", "higher than": "gt", "exceeding": "gt", ">=": "ge",
       "at least": "ge", "no less than": "ge", "not less than": "ge", "minimum of": "ge"}
WORD_OPS = {"higher": "ge", "greater": "ge", "more": "ge", "above": "ge", "over": "ge", "lower": "le", "less": "le",
            "below": "le", "fewer": "le", "under": "le"}
_OP = "|".join(sorted((re.escape(k) for k in OPS), key=len, reverse=True))
_LEAD = r"\s*(?:levels?\s+|values?\s+|concentration\s+|results?\s+)?(?:of\s+|is\s+|:\s*|=\s*)?"
_COMPARE = [
    re.compile(rf"{_LEAD}({_OP})\s*{N}\s*{LAB_UNIT}?"),
    re.compile(rf"{_LEAD}{N}\s*{LAB_UNIT}?\s*(?:or|and)\s+(higher|greater|more|above|over|lower|less|below|fewer|under)"),
    re.compile(rf"{_LEAD}(?:between\s+|from\s+)?{N}\s*{LAB_UNIT}?\s*(?:-|to|and)\s*{N}\s*{LAB_UNIT}?"),
]
TEST = {"lt": lambda v, a, b: v < a, "le": lambda v, a, b: v <= a, "gt": lambda v, a, b: v > a,
        "ge": lambda v, a, b: v >= a, "range": lambda v, a, b: a <= v <= b}
WORDS = {"lt": "below {a}", "le": "{a} or lower", "gt": "above {a}", "ge": "{a} or higher", "range": "{a} to {b}"}


def _period(n: str | None, unit: str) -> tuple[float, str]:
    return float(n or 1), _unit(unit) or "month"


def _period_text(n: float, unit: str) -> str:
    return f"{n:g} {unit}{'s' if n != 1 else ''}"


def _num(x: float) -> str:
    return f"{x:g}"


# -- labs --------------------------------------------------------------------------------------
def _lab_judge(analyte: vocab.Analyte, op: str, a: float, b: float | None, unit: str | None,
               window: tuple[float, str] | None, lasting: tuple[float, str] | None):
    wanted = unit if unit is not None else analyte.unit
    bound = WORDS[op].format(a=_num(a), b=_num(b) if b is not None else "")

    def judge(subject: Subject, today: date) -> Outcome:
        found = [f for f in subject.facts.of_kind(analyte.kind)
                 if f.data.get("loinc_code") in analyte.loinc or analyte.display.search(str(f.data.get("display") or ""))]
        if not found:
            return Outcome(None, (), f"No {analyte.name} result on the chart.")
        fact = max(found, key=lambda f: str(f.data.get("effective_at") or ""))
        row = fact.data
        shown = f"{analyte.name} {row.get('value')} {row.get('unit') or ''}".strip() + f" on {fact.date}"
        if vocab.unit_key(row.get("unit")) != vocab.unit_key(wanted):
            return Outcome(None, (fact.id,), f"Latest {shown}: in another unit than the criterion's "
                           f"({wanted or 'no unit'}), so not compared.")
        days = (window[0], window[1]) if window else (DEFAULT_LAB_DAYS, "day")
        oldest = today - _days(*days)
        if not fact.date or fact.date < oldest.isoformat():
            limit = _period_text(*window) if window else "a year"
            return Outcome(None, (fact.id,), f"Latest {shown}: older than {limit}, so it does not settle this.")
        try:
            value = float(row.get("value"))
        except (TypeError, ValueError):
            return Outcome(None, (fact.id,), f"Latest {shown}: not a number.")
        holds = TEST[op](value, a, b)
        reason = f"Latest {shown}; the criterion asks {bound}."
        if holds and lasting:
            previous = row.get("previous") or {}
            since = (date.fromisoformat(fact.date) - _days(*lasting)).isoformat()
            try:
                held = TEST[op](float(previous.get("value")), a, b) and str(previous.get("effective_at"))[:10] <= since
            except (TypeError, ValueError):
                held = False
            if not held:
                return Outcome(None, (fact.id,), reason + f" No earlier result shows it for {_period_text(*lasting)}.")
            reason += f" Also {_num(float(previous['value']))} on {str(previous['effective_at'])[:10]}."
        return Outcome(holds, (fact.id,), reason)
    return judge


def read_labs(text: str, taken: list[Part]) -> list[Part]:
    parts: list[Part] = []
    for analyte in vocab.ANALYTES:
        for m in analyte.criterion.finditer(text):
            if not _free(taken + parts, m.start(), m.end()):
                continue
            for i, pattern in enumerate(_COMPARE):  # noqa: B007 - i names the comparison after the loop
                c = pattern.match(text, m.end())
                if c:
                    break
            else:
                continue
            g = c.groups()
            if i == 0:
                op, a, b, unit = OPS[" ".join(g[0].split())], float(g[1]), None, g[2]
            elif i == 1:
                op, a, b, unit = WORD_OPS[g[2]], float(g[0]), None, g[1]
            else:
                op, a, b, unit = "range", float(g[0]), float(g[2]), g[1] or g[3]
            end = c.end()
            window = lasting = None
            if w := WINDOW.match(text, end):
                window, end = _period(w.group(1), w.group(2)), w.end()
            if d := AT_LEAST.match(text, end):
                lasting, end = _period(d.group(1) or d.group(3), d.group(2) or d.group(4)), d.end()
            unit = vocab.unit_key(unit) if unit else None
            parts.append(Part(m.start(), end, "lab", _lab_judge(analyte, op, a, b, unit, window, lasting)))
    return parts


# -- conditions --------------------------------------------------------------------------------
def _condition_judge(concept: vocab.Concept, history: bool, within: tuple[float, str] | None,
                     lasting: tuple[float, str] | None):
    name = concept.name[0].upper() + concept.name[1:]

    def judge(subject: Subject, today: date) -> Outcome:
        facts = subject.facts
        problems = facts.of_kind("problem")
        found = [f for f in problems if str(f.data.get("snomed_code") or "") in concept.snomed
                 or concept.display.search(str(f.data.get("display") or ""))]
        if not found:
            near = [f for f in problems if concept.near and concept.near.search(str(f.data.get("display") or ""))]
            if near:
                shown = "; ".join(str(f.data.get("display")) for f in near)
                return Outcome(None, _ids(near), f"{name}: not on the problem list as such, but {shown} is: "
                               "whether it counts is for the clinician.")
            if "problem" not in facts.complete:
                return Outcome(None, (), f"{name}: the chart's problem list was not read whole.")
            read = _ids(problems) or _none_fact(subject, "P")
            if history:
                return Outcome(None, read, f"{name}: not on the active problem list; the chart lists active "
                               "problems only, so a past episode is not ruled out.")
            return Outcome(False, read, f"{name}: not on the active problem list.")
        listed = "; ".join(f"{f.data.get('display')} since {f.date or 'an unrecorded date'}" for f in found)
        if within is None and lasting is None:
            return Outcome(True, _ids(found), f"On the problem list: {listed}.")
        dated = [f for f in found if f.date]
        if not dated:
            return Outcome(None, _ids(found), f"On the problem list without an onset date: {listed}.")
        if within is not None:
            since = (today - _days(*within)).isoformat()
            recent = [f for f in dated if f.date >= since]
            if recent:
                return Outcome(True, _ids(recent), f"On the problem list: {listed}: within the last "
                               f"{_period_text(*within)}.")
            if len(dated) < len(found):
                return Outcome(None, _ids(found), f"On the problem list: {listed}.")
            return Outcome(False, _ids(found), f"On the problem list: {listed}: not diagnosed within the last "
                           f"{_period_text(*within)} (as of {today.isoformat()}).")
        before = (today - _days(*lasting)).isoformat()
        long_ = [f for f in dated if f.date <= before]
        if long_:
            return Outcome(True, _ids(long_), f"On the problem list: {listed}: {_period_text(*lasting)} or longer.")
        return Outcome(False, _ids(found), f"On the problem list: {listed}: for less than {_period_text(*lasting)}.")
    return judge


HISTORY = re.compile(r"\b(?:history|prior|previous|past|ever|formerly)\b")


def read_conditions(text: str, taken: list[Part]) -> list[Part]:
    parts: list[Part] = []
    history = HISTORY.search(text) is not None
    for concept in vocab.CONCEPTS:
        for m in concept.criterion.finditer(text):
            if not _free(taken + parts, m.start(), m.end()):
                continue
            end, within, lasting = m.end(), None, None
            if w := WINDOW.match(text, end):
                within, end = _period(w.group(1), w.group(2)), w.end()
            elif d := AT_LEAST.match(text, end):
                lasting, end = _period(d.group(1) or d.group(3), d.group(2) or d.group(4)), d.end()
            parts.append(Part(m.start(), end, "condition", _condition_judge(concept, history, within, lasting)))
    return parts


# -- current therapy ---------------------------------------------------------------------------
FOR = re.compile(rf"\bfor\s+(?:at\s+least\s+|more\s+than\s+|over\s+|>=\s*)?{N}\s*{UNIT}")


def _therapy_judge(drug: vocab.DrugClass, lasting: tuple[float, str] | None):
    def judge(subject: Subject, today: date) -> Outcome:
        facts = subject.facts
        orders = facts.of_kind("medication")
        members = [f for f in orders if drug.member.search(str(f.data.get("medication_name") or ""))]
        active = [f for f in members if str(f.data.get("status") or "active") == "active"]
        named = "; ".join(f"{f.data.get('medication_name')} ({f.data.get('status') or 'active'}, ordered {f.date})"
                          for f in members)
        if active:
            if lasting is None:
                return Outcome(True, _ids(active), f"Active order: {named}.")
            before = (today - _days(*lasting)).isoformat()
            if any(f.date and f.date <= before for f in active):
                return Outcome(True, _ids(active), f"Active order: {named}: {_period_text(*lasting)} or longer.")
            if all(f.date for f in active):
                return Outcome(False, _ids(active), f"Active order: {named}: for less than {_period_text(*lasting)}.")
            return Outcome(None, _ids(active), f"Active order without a date: {named}.")
        if members:
            return Outcome(None, _ids(members), f"Ordered but not active: {named}.")
        if "medication" not in facts.complete:
            return Outcome(None, (), "The chart's medication list was not read whole.")
        return Outcome(False, _ids(orders) or _none_fact(subject, "M"),
                       f"No {drug.name} among the active medication orders.")
    return judge


def read_therapy(text: str, taken: list[Part]) -> list[Part]:
    found: list[tuple[vocab.DrugClass, Part]] = []
    for drug in vocab.DRUG_CLASSES:
        for m in drug.criterion.finditer(text):
            if _free(taken + [p for _d, p in found], m.start(), m.end()):
                found.append((drug, Part(m.start(), m.end(), "therapy")))
    if not found:
        return []
    lasting, extra = None, []
    f = FOR.search(text)  # "stable ACE inhibitor or ARB dose for 4 weeks": the duration is every class's
    if f and _free(taken + [p for _d, p in found], f.start(), f.end()):
        lasting = _period(f.group(1), f.group(2))
        extra.append(Part(f.start(), f.end(), "filler"))
    return [Part(p.start, p.end, "therapy", _therapy_judge(d, lasting)) for d, p in found] + extra


__all__ = ["read_conditions", "read_labs", "read_therapy"]
