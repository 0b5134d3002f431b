"""A generated safety matrix: brand and combination names from the bundled drug dictionary and
our overlay, prescribed to the demo patients the curated rules say they endanger.

Where the hand-written matrix (``matrix.py``) checks 23 generic names cell by cell, this one is
generated from the curated tables, so every rule is tried with the names people actually write:

- Allergy groups: every class with an allergy rule (``classes.CLASSES`` with ``allergy_cross``),
  and every single-ingredient allergy on a demo chart whose ingredient has brand names. Names:
  every brand or combination whose ingredients fall in the class (or contain the ingredient).
  Patients: the demo patients with that allergy. Expected: an allergy or cross-reactivity
  finding at least as severe as the rule implies (``expected_allergy``: the same ingredient or a
  recorded class name: high; otherwise the class's cross-reactivity rule, by the recorded
  reaction; members only ever at low cross-reactivity: low).
- Interaction groups: every rule of ``rules.CLASS_INTERACTIONS``, each side in turn. Names:
  every brand or combination with an ingredient on one side (and none the rule exempts).
  Patients: the demo patients with an active medication on the other side. Expected: an
  interaction finding at least as severe as the rule.

A "brand or combination name" is a dictionary name that shares no word with its ingredients
("Zosyn", "Excedrin", "MS Contin"), or any name of a fixed-dose combination. Its ingredients are
read from the dictionary's generic (``DrugResolver.parts``), the gate resolves the name itself.
Each group takes at most ``MAX_NAMES_PER_GROUP`` names, spread over the group's ingredients
(round robin; our overlay's names first, then combinations, then the shortest names), so a
selftest stays short.

A miss: the expected finding is absent (or less severe). A false clear: a case that expects a
high or moderate finding got no high or moderate finding at all.

Invariant: ``run_generated_matrix`` only reads the databases it is given (charts on
``matrix.AS_OF``, the demo patients' ids from the shipped demo file); it counts, never raises
for a wrong case.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from appliance.medication.names import key_of, library_lexicon, overlay
from appliance.safety import chart as charts
from appliance.safety.checks import keys_of
from appliance.safety.classes import (
    BY_REACTION,
    CLASS_ALLERGY,
    CLASSES,
    HIGH,
    LOW,
    LOW_CROSS,
    MODERATE,
    RXNORM_TO_INGREDIENT,
    classes_named_in,
    classes_of,
)
from appliance.safety.gate import check_prescription
from appliance.safety.ingredients import default_resolver, ingredients_of
from appliance.safety.knowledge import StoreKnowledge
from appliance.safety.matrix import AS_OF
from appliance.safety.report import SEVERITIES
from appliance.safety.rules import CLASS_INTERACTIONS

MAX_NAMES_PER_GROUP = 30
ALLERGY_KINDS = ("allergy", "cross_reactivity")


@dataclass(frozen=True)
class Case:
    group: str  # "allergy:penicillins", "allergy:ingredient:morphine", "interaction:3:a"
    name: str  # the brand or combination name prescribed
    patient: str
    kinds: tuple[str, ...]  # a finding of one of these kinds ...
    severity: str  # ... at least this severe is expected


def brand_names() -> dict[str, frozenset[str]]:
    """Every brand or combination name of the dictionary and the overlay -> its ingredients."""
    resolver = default_resolver()
    found: dict[str, frozenset[str]] = {}
    for key, generic in {**library_lexicon(), **overlay()}.items():
        parts = resolver.parts(generic)
        if not parts:
            continue
        words = set(key.split())
        if len(parts) > 1 or not words & {w for p in parts for w in key_of(p).split()}:
            found[key] = parts
    return found


def _pick(names: dict[str, frozenset[str]], ingredients: frozenset[str]) -> list[str]:
    """At most MAX_NAMES_PER_GROUP names containing one of ``ingredients``, spread over them:
    round robin over the ingredients; for each, our overlay's names first, then combinations,
    then the shortest names."""
    ours = overlay()
    by_ingredient = {
        i: sorted((n for n, parts in names.items() if i in parts),
                  key=lambda n: (n not in ours, len(names[n]) == 1, len(n), n))
        for i in sorted(ingredients)
    }
    picked: list[str] = []
    depth = 0
    while len(picked) < MAX_NAMES_PER_GROUP and any(depth < len(v) for v in by_ingredient.values()):
        for options in by_ingredient.values():
            if depth < len(options) and options[depth] not in picked and len(picked) < MAX_NAMES_PER_GROUP:
                picked.append(options[depth])
        depth += 1
    return picked


def _allergen(row: dict) -> frozenset[str]:
    found = set(ingredients_of(str(row.get("substance") or "")))
    code = str(row.get("substance_code") or "")
    if code in RXNORM_TO_INGREDIENT:
        found.add(RXNORM_TO_INGREDIENT[code])
    return frozenset(found)


def expected_allergy(class_id: str | None, drug: frozenset[str], row: dict) -> str:
    """The severity the allergy rules imply for a drug with these ingredients and this allergy
    row, within one class (None: a single-ingredient allergy)."""
    allergen = _allergen(row)
    if drug & allergen or class_id is None:
        return HIGH
    cls = CLASSES[class_id]
    if class_id in classes_named_in(row.get("substance")):
        return LOW if drug & cls.low_cross_members else HIGH
    rule = LOW_CROSS if (drug | allergen) & cls.low_cross_members else cls.allergy_cross
    if rule == CLASS_ALLERGY:
        return HIGH
    if rule == BY_REACTION:
        return HIGH if charts.allergy_is_severe(row) else MODERATE
    return LOW


def _allergy_cases(names: dict[str, frozenset[str]], charts_by_id: dict[str, dict]) -> list[tuple[Case, frozenset[str]]]:
    cases = []
    rows = [(pid, row) for pid, chart in charts_by_id.items() for row in charts.allergies(chart)]
    for cid, cls in sorted(CLASSES.items()):
        if not cls.allergy_cross:
            continue
        hit = [(pid, row) for pid, row in rows
               if cid in classes_of(_allergen(row)) or cid in classes_named_in(row.get("substance"))]
        for name in _pick(names, cls.members) if hit else []:
            for pid, row in hit:
                severity = expected_allergy(cid, names[name], row)
                cases.append((Case(f"allergy:{cid}", name, pid, ALLERGY_KINDS, severity), names[name]))
    singles = sorted({next(iter(_allergen(row))) for _, row in rows if len(_allergen(row)) == 1})
    for ingredient in singles:
        hit = [(pid, row) for pid, row in rows if ingredient in _allergen(row)]
        for name in _pick(names, frozenset({ingredient})):
            for pid, _row in hit:
                cases.append((Case(f"allergy:ingredient:{ingredient}", name, pid, ALLERGY_KINDS, HIGH), names[name]))
    return cases


def _interaction_cases(names: dict[str, frozenset[str]], charts_by_id: dict[str, dict]
                       ) -> list[tuple[Case, frozenset[str]]]:
    cases = []
    meds = {pid: charts.active_medications(chart) for pid, chart in charts_by_id.items()}
    for index, rule in enumerate(CLASS_INTERACTIONS):
        for side, (ours, theirs) in (("a", (rule.a, rule.b)), ("b", (rule.b, rule.a))):
            patients = [pid for pid, listed in meds.items()
                        if any(keys_of(m.ingredients) & theirs and not m.ingredients & rule.exempt for m in listed)]
            if not patients:
                continue
            usable = {n: parts for n, parts in names.items() if keys_of(parts) & ours and not parts & rule.exempt}
            members = frozenset(i for parts in usable.values() for i in parts if keys_of(frozenset({i})) & ours)
            for name in _pick(usable, members):
                for pid in patients:
                    case = Case(f"interaction:{index}:{side}", name, pid, ("interaction",), rule.severity)
                    cases.append((case, names[name]))
    return cases


def _judge(case: Case, report) -> tuple[bool, bool]:
    """(missed, false clear) of one case."""
    at_least = SEVERITIES.index(case.severity)
    hit = any(f.kind in case.kinds and SEVERITIES.index(f.severity) <= at_least for f in report.findings)
    serious = any(f.severity in (HIGH, MODERATE) for f in report.findings)
    return not hit, case.severity in (HIGH, MODERATE) and not serious


def run_generated_matrix(ehr_db_path: Path | str, knowledge_db_path: Path | str,
                         umls_db_path: Path | str | None = None) -> dict:
    """Every generated case against the gate on these databases: ``cases``, ``names`` (distinct),
    ``patients``, ``groups``, ``missed``, ``false_clear``, ``blocking`` and the cases that failed
    (``problems``, for the reader)."""
    from ehr_db.demo_loader import read_demo_patients
    from ehr_db.repository import EhrRepository

    started = time.perf_counter()
    repo = EhrRepository(ehr_db_path)
    knowledge = StoreKnowledge(knowledge_db_path, umls_db_path)
    charts_by_id = {p["id"]: repo.get_patient_chart(p["id"], today=AS_OF) for p in read_demo_patients()}
    names = brand_names()
    cases = _allergy_cases(names, charts_by_id) + _interaction_cases(names, charts_by_id)
    missed = false_clear = blocking = 0
    problems: list[str] = []
    try:
        for case, _parts in cases:
            report = check_prescription(case.name, charts_by_id[case.patient], knowledge)
            miss, clear = _judge(case, report)
            missed += miss
            false_clear += clear
            blocking += report.blocking
            if miss or clear:
                problems.append(f"{case.group} {case.name} for {case.patient}: expected {'/'.join(case.kinds)} "
                                f"at least {case.severity}" + (", reported clear" if clear else "") + ": "
                                + " | ".join(report.lines()))
    finally:
        knowledge.close()
    return {
        "cases": len(cases), "names": len({c.name for c, _ in cases}), "patients": len({c.patient for c, _ in cases}),
        "groups": len({c.group for c, _ in cases}), "missed": missed, "false_clear": false_clear,
        "blocking": blocking, "seconds": round(time.perf_counter() - started, 2), "problems": problems,
    }


__all__ = ["MAX_NAMES_PER_GROUP", "Case", "brand_names", "expected_allergy", "run_generated_matrix"]
