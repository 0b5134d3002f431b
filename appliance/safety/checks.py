"""The chart checks of the medication safety gate, one pure function each.

Each takes the prescribed drug (``Prescribed``: its name, the local data's generic and safety
summary when known, its ingredients and classes) and parts of the chart, and returns findings.
Here: allergies, duplicates and class interactions (the checks against what else the chart
lists); the checks against the patient (pregnancy, renal function, age) are in
``patient_checks``.

Invariants:
- At most one finding per allergy row, per active medication (duplicate, class interaction),
  and per chart-aware kind (pregnancy, renal, age): the most severe reason wins and the others
  are kept in its evidence, so a report reads one line per problem.
- A curated rule and the drug's safety data may both speak; the finding takes the higher
  severity and names both sources.
- Names (the prescribed drug's, a charted medication's, a recorded allergen's) are read through
  one resolution (``ingredients.ingredients_of``), so brands and combinations count by what
  they contain.
- The same ingredient ordered twice is a high duplicate (a double dose); two members of a
  class keep the class's curated duplicate severity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from appliance.safety import chart as charts
from appliance.safety.chart import ChartMedication
from appliance.safety.classes import (
    BY_REACTION,
    CLASS_ALLERGY,
    CLASSES,
    CROSS_CLASS_RULES,
    DUPLICATE_GROUPS,
    HIGH,
    LOW,
    LOW_CROSS,
    MODERATE,
    RXNORM_TO_INGREDIENT,
    classes_named_in,
    classes_of,
    fold,
)
from appliance.safety.ingredients import ingredients_of
from appliance.safety.report import SEVERITIES, Finding
from appliance.safety.rules import (
    CLASS_INTERACTIONS,
)
from mcp_servers.knowledge.names import lookup_keys

CURATED = "curated table (appliance/safety)"
DATA = "local drug data"


@dataclass(frozen=True)
class Prescribed:
    name: str  # as prescribed
    safeties: tuple[dict, ...]  # check_drug_safety's results: the whole name, or its known ingredients
    ingredients: frozenset[str]
    classes: frozenset[str]
    whole: bool  # the local data knows the name as a whole (one generic)
    # Ingredients the local data did not check (unknown to it, or beyond the lookup bound):
    # curated class rules judge them against every medication.
    unchecked: frozenset[str] = frozenset()

    @property
    def generics(self) -> tuple[str, ...]:
        """The local data's generic names the drug was checked as."""
        return tuple(s["drug"] for s in self.safeties if s.get("drug"))

    @property
    def label(self) -> str:
        """The generic when the data knows the name as a whole, with the name as prescribed when
        that was another name ("Glucophage (metformin)"); a name the data does not know as a
        whole with its ingredients ("Zosyn (piperacillin, tazobactam)")."""
        if not (self.whole and self.generics):
            named = fold(self.name)
            others = sorted(i for i in self.ingredients if i not in named)
            return f"{self.name} ({', '.join(others)})" if others and len(others) <= 4 else self.name
        generic = self.generics[0]
        return generic if fold(self.name).startswith(fold(generic)) else f"{self.name} ({generic})"

    @property
    def keys(self) -> frozenset[str]:
        return keys_of(self.ingredients)


def keys_of(ingredients: frozenset[str]) -> frozenset[str]:
    """Rule keys ("ing:x", "class:y") for a set of ingredients."""
    return frozenset(f"ing:{i}" for i in ingredients) | frozenset(f"class:{c}" for c in classes_of(ingredients))


def worst(severities) -> str:
    return min(severities, key=SEVERITIES.index)


# Where a clause ends: after ";", ",", ":" or ")" before a space, or at a spaced dash.
_CLAUSE_END = re.compile(r"[;,:)](?=\s)|\s[-\u2013\u2014](?=\s)")


def _clause_ends(text: str) -> list[int]:
    return [m.end() for m in _CLAUSE_END.finditer(text)]


def clip_at_clause(text: str, limit: int = 160, around: re.Match | None = None) -> str:
    """About ``limit`` characters of a label sentence, cut only where a clause ends (never
    mid-clause: "bleeding in ..." is never shown), starting at the clause that holds ``around``
    when the match lies past the first ``limit`` characters. A sentence with no clause end near
    the limit is kept whole: a warning is better long than cut."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    start, need = 0, 0  # where the piece starts; how far it must reach (past the match)
    if around is not None:
        found = re.search(re.escape(" ".join(around.group(0).split())), text)
        if found is not None and found.end() > limit:
            strong = [m.end() for m in re.finditer(r"[;:](?=\s)", text[:found.start()])]
            before = strong or [end for end in _clause_ends(text) if end <= found.start()]
            start = before[-1] if before else 0
        if found is not None:
            need = found.end()
    rest = text[start:].lstrip()
    need = max(0, need - (len(text) - len(rest)))
    if len(rest) > limit:
        ends = [end for end in _clause_ends(rest) if max(limit // 2, need) <= end <= max(limit, need)]
        later = [end for end in _clause_ends(rest) if max(limit, need) < end <= 2 * limit + need]
        cut = ends[-1] if ends else (later[0] if later else None)
        if cut is not None and cut < len(rest):
            rest = rest[:cut].rstrip(" ,;:-\u2013\u2014") + " ..."
    return ("... " if start > 0 else "") + rest


def names_match(a: str, b: str) -> bool:
    """Same drug by name: equal lookup keys (salt, dose and form words dropped), or one name's
    words start the other's ("albuterol" and "Albuterol inhaler")."""
    for x in lookup_keys(a):
        for y in lookup_keys(b):
            if x == y:
                return True
            short, long_ = sorted((x.split(), y.split()), key=len)
            if short and len(short[0]) >= 4 and long_[:len(short)] == short:
                return True
    return False


def safety_sentences(safeties: tuple[dict, ...]) -> list[tuple[str, str]]:
    """(field, sentence) pairs of the drug's boxed warnings, contraindications and warnings."""
    out = []
    items = []
    for safety in safeties:
        items.append(("boxed_warning", safety.get("boxed_warning")))
        items += [("contraindications", c) for c in safety.get("contraindications") or []]
        items += [("major_warnings", w) for w in safety.get("major_warnings") or []]
    for field, text in items:
        for sentence in re.split(r"(?<=[.;])\s+(?=[A-Z])", text or ""):
            if sentence.strip():
                out.append((field, sentence.strip()))
    return out


# -- allergies -------------------------------------------------------------------------------
def _cross_severity(rule: str, severe: bool) -> str:
    if rule == CLASS_ALLERGY:
        return HIGH
    if rule == BY_REACTION:
        return HIGH if severe else MODERATE
    if rule == LOW_CROSS:
        return LOW
    return rule  # a literal severity


def _allergy_match(drug: Prescribed, row: dict) -> tuple[str, str, str] | None:
    """(kind, severity, reason) for one allergy row, the strongest match only."""
    substance = str(row.get("substance") or "")
    allergen = set(ingredients_of(substance))
    code = str(row.get("substance_code") or "")
    if code in RXNORM_TO_INGREDIENT:
        allergen.add(RXNORM_TO_INGREDIENT[code])
    named = classes_named_in(substance)
    allergen_classes = classes_of(allergen) | named
    severe = charts.allergy_is_severe(row)

    same = sorted(drug.ingredients & allergen)
    if same:
        return "allergy", HIGH, f"{drug.label} contains {', '.join(same)}"
    for cid in sorted(drug.classes & named):
        cls = CLASSES[cid]
        if drug.ingredients & cls.low_cross_members:
            return "cross_reactivity", LOW, f"{drug.label} is one of the {cls.label}, usually tolerated"
        return "allergy", HIGH, f"{drug.label} is one of the {cls.label}"
    best: tuple[str, str, str] | None = None
    for cid in sorted(drug.classes & classes_of(allergen)):
        cls = CLASSES[cid]
        if not cls.allergy_cross:
            continue
        rule = LOW_CROSS if (drug.ingredients | allergen) & cls.low_cross_members else cls.allergy_cross
        found = ("cross_reactivity", _cross_severity(rule, severe), f"{drug.label} and {substance} are both {cls.label}")
        if best is None or SEVERITIES.index(found[1]) < SEVERITIES.index(best[1]):
            best = found
    for rule in CROSS_CLASS_RULES:
        if rule.allergen_class in allergen_classes and rule.drug_class in drug.classes:
            if rule.reaction_must_match and not re.search(rule.reaction_must_match, row.get("reaction") or "", re.I):
                continue
            found = ("cross_reactivity", _cross_severity(rule.severity, severe), f"{drug.label}: {rule.note}")
            if best is None or SEVERITIES.index(found[1]) < SEVERITIES.index(best[1]):
                best = found
    if best:
        return best
    if substance and not named and names_match(substance, drug.name):
        return "allergy", HIGH, f"the name {drug.name} matches the recorded allergen"
    return None


def allergy_findings(drug: Prescribed, chart: dict) -> list[Finding]:
    findings = []
    for row in charts.allergies(chart):
        match = _allergy_match(drug, row)
        if match is None:
            continue
        kind, severity, reason = match
        details = "; ".join(str(v) for v in (row.get("reaction"), row.get("severity")) if v)
        text = f"{row.get('substance')} allergy recorded ({details or 'no reaction recorded'}): {reason}"
        findings.append(Finding(kind, severity, text, {"allergy": charts.allergy_evidence(row)}, CURATED))
    return findings


# -- duplicates ------------------------------------------------------------------------------
def _duplicate(drug: Prescribed, med: ChartMedication) -> tuple[str, str] | None:
    shared = sorted(drug.ingredients & med.ingredients)
    if shared or ((not drug.ingredients or not med.ingredients) and names_match(drug.name, med.name)):
        # The same drug ordered twice is a double dose, whatever its class.
        what = f"same ingredient ({', '.join(shared)})" if shared else "same drug by name"
        return HIGH, f"{what}: a double dose unless this replaces the current order"
    best: tuple[str, str] | None = None
    for cid in sorted(drug.classes & classes_of(med.ingredients)):
        cls = CLASSES[cid]
        ours = (drug.ingredients & cls.members) - cls.duplicate_exempt
        theirs = (med.ingredients & cls.members) - cls.duplicate_exempt
        if cls.duplicate and ours and theirs:
            found = (cls.duplicate, f"two {cls.label}")
            if best is None or SEVERITIES.index(found[0]) < SEVERITIES.index(best[0]):
                best = found
    for group, severity, reason in DUPLICATE_GROUPS:
        ours, theirs = drug.classes & group, classes_of(med.ingredients) & group
        if ours and theirs and ours != theirs and best is None:
            best = (severity, reason)
    return best


def duplicate_findings(drug: Prescribed, meds: list[ChartMedication]) -> list[Finding]:
    findings = []
    for med in meds:
        found = _duplicate(drug, med)
        if found:
            status = med.row.get("status") or "active"
            text = f"already on {med.name} ({status}): {found[1]}"
            findings.append(Finding("duplicate", found[0], text, {"medication": med.evidence}, CURATED))
    return findings


# -- class-level interactions ----------------------------------------------------------------
def class_interaction_findings(drug: Prescribed, meds: list[ChartMedication], judged: set[str]) -> list[Finding]:
    """Curated class-level interactions for what the interaction data did not judge: every
    ingredient against a medication the data did not judge together with the drug, and the
    ingredients the data does not know (``drug.unchecked``) against those it did judge (names in
    ``judged``): "amiloride-hydrochlorothiazide" with lisinopril is judged by the data for
    hydrochlorothiazide and by the class rules for amiloride."""
    findings = []
    for med in meds:
        ours = keys_of(drug.unchecked) if med.name in judged else drug.keys
        if not ours:
            continue
        med_keys = keys_of(med.ingredients)
        hits = []
        for rule in CLASS_INTERACTIONS:
            if (drug.ingredients | med.ingredients) & rule.exempt:
                continue
            if (rule.a & ours and rule.b & med_keys) or (rule.b & ours and rule.a & med_keys):
                hits.append(rule)
        if hits:
            top = min(hits, key=lambda r: SEVERITIES.index(r.severity))
            text = f"interaction with {med.name}: {top.text}"
            evidence = {"medication": med.evidence, "rules": [r.text for r in hits]}
            findings.append(Finding("interaction", top.severity, text, evidence, CURATED))
    return findings


__all__ = [
    "CURATED", "DATA", "Prescribed", "allergy_findings", "class_interaction_findings", "clip_at_clause",
    "duplicate_findings", "keys_of", "names_match", "safety_sentences", "worst",
]
