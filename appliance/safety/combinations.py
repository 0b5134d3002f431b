"""Fixed-dose combination products read by convention: which ingredient a written strength names.

A clinician writes "Augmentin 875 mg" for amoxicillin 875 mg with clavulanate 125 mg (the
strength names the amoxicillin component), "Percocet 5/325" for oxycodone 5 mg with
acetaminophen 325 mg (the parts in the order the product's generic name lists them),
"Bactrim DS" for sulfamethoxazole 800 mg with trimethoprim 160 mg. ``by_convention(order,
names)`` turns such an order into one order per ingredient, so the dose checks compare every
ingredient with its own limits.

Invariants:
- Only the products in ``CONVENTIONS`` are read, each by the conventions its label and common
  usage give; anything else (an unknown product, a strength the table does not list, more parts
  than ingredients) is None and stays "not checked": a split is never guessed.
- A single strength is split only through the product's listed strengths ("875" -> 125 mg of
  clavulanate; a suspension's "400 mg/5 mL" -> 57 mg per 5 mL); unlisted strengths of the same
  product are None. A dose per kg names the single ingredient; the others follow a written
  suspension strength's ratio, else get no amount (reported as not checked).
- Parts written as "N/M" are given to the ingredients in the product's listed order, except
  sulfamethoxazole-trimethoprim, whose larger part is always sulfamethoxazole (5:1 in every
  product), whichever order the name lists them.
- Pure; no logging.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from appliance.medication import order_words
from appliance.medication.orders import Amount, Order


@dataclass(frozen=True)
class Convention:
    ingredients: tuple[str, ...]  # in the order "N/M" strengths list them
    single: str | None = None  # the ingredient a single strength names ("Augmentin 875 mg": amoxicillin)
    # single strength (mg) -> the other ingredients' mg in one unit of that product (a tablet)
    companions: dict[float, dict[str, float]] = field(default_factory=dict)
    # single strength (mg per 5 mL of a suspension) -> the other ingredients' mg per 5 mL
    per_5ml: dict[float, dict[str, float]] = field(default_factory=dict)
    # words in the order that name a strength ("ds", "#3") -> mg per unit, in ``ingredients`` order
    named: dict[str, tuple[float, ...]] = field(default_factory=dict)
    larger_first: str | None = None  # the ingredient that always has the larger part


_CLAV = "clavulanate"
CONVENTIONS: dict[frozenset[str], Convention] = {frozenset(c.ingredients): c for c in (
    # Augmentin label: tablets 250/125, 500/125, 875/125; chewables and suspensions 125/31.25,
    # 200/28.5, 250/62.5, 400/57 (per 5 mL for suspensions); ES-600 600/42.9 per 5 mL.
    Convention(("amoxicillin", _CLAV), single="amoxicillin",
               companions={250: {_CLAV: 125}, 500: {_CLAV: 125}, 875: {_CLAV: 125}, 200: {_CLAV: 28.5},
                           400: {_CLAV: 57}},  # tablets and chewables
               per_5ml={125: {_CLAV: 31.25}, 200: {_CLAV: 28.5}, 250: {_CLAV: 62.5}, 400: {_CLAV: 57},
                        600: {_CLAV: 42.9}}),
    Convention(("oxycodone", "acetaminophen")),  # Percocet, Endocet: 2.5-10 / 325
    Convention(("hydrocodone", "acetaminophen")),  # Norco, Vicodin, Lortab: 5-10 / 300-325
    Convention(("tramadol", "acetaminophen")),  # Ultracet 37.5/325
    Convention(("acetaminophen", "codeine"), named={"#3": (300, 30), "#4": (300, 60), "no. 3": (300, 30),
                                                    "no. 4": (300, 60)}),  # Tylenol with Codeine
    Convention(("sitagliptin", "metformin")),  # Janumet 50/500, 50/1000
    Convention(("sulfamethoxazole", "trimethoprim"), larger_first="sulfamethoxazole",
               named={"ds": (800, 160), "double strength": (800, 160), "ss": (400, 80),
                      "single strength": (400, 80)}),  # Bactrim, Septra
    Convention(("carbidopa", "levodopa")),  # Sinemet 10/100, 25/100, 25/250
    Convention(("losartan", "hydrochlorothiazide")),  # Hyzaar 50/12.5, 100/12.5, 100/25
    Convention(("lisinopril", "hydrochlorothiazide")),  # Zestoretic 10/12.5, 20/12.5, 20/25
    Convention(("valsartan", "hydrochlorothiazide")),  # Diovan HCT 80-320 / 12.5-25
    Convention(("triamterene", "hydrochlorothiazide")),  # Dyazide 37.5/25, Maxzide 75/50
    Convention(("amlodipine", "benazepril")),  # Lotrel 2.5/10 - 10/40
    Convention(("amlodipine", "atorvastatin")),  # Caduet 2.5/10 - 10/80
    Convention(("ezetimibe", "simvastatin")),  # Vytorin 10/10 - 10/80
    Convention(("glyburide", "metformin")),  # Glucovance 1.25/250 - 5/500
    Convention(("buprenorphine", "naloxone")),  # Suboxone 2/0.5, 8/2
    Convention(("bisoprolol", "hydrochlorothiazide")),  # Ziac 2.5/6.25 - 10/6.25
)}
# An unlabelled "N/M" (or "N/M/K") in the text: "Percocet 5/325 1 tablet".
_PARTS = re.compile(r"(?<![\w./])(\d+(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?){1,3})(?![\w./]|\s*(?:mg|mcg|g|ml)\b)", re.I)


def convention_for(names) -> Convention | None:
    return CONVENTIONS.get(frozenset(names))


def _mg_amount(text: str, value: float) -> Amount:
    return Amount(text=text, value=value, low=None, unit="mg")


def _assign(convention: Convention, parts: tuple[float, ...]) -> dict[str, float]:
    if convention.larger_first:
        big = convention.larger_first
        other = next(i for i in convention.ingredients if i != big)
        return {big: max(parts), other: min(parts)}
    return dict(zip(convention.ingredients, parts))


def _per_unit(order: Order, mg: dict[str, float], text: str) -> dict[str, Order]:
    """Orders of ``mg`` per unit of form each: the order's dose counts units ("1 tablet")."""
    return {name: replace(order, strength=_mg_amount(text, value)) for name, value in mg.items()}


def _per_dose(order: Order, mg: dict[str, float], text: str) -> dict[str, Order]:
    return {name: replace(order, dose=_mg_amount(text, value), strength=None) for name, value in mg.items()}


def _per_kg(convention: Convention, order: Order) -> dict[str, Order]:
    """A dose per kg names the single ingredient ("Augmentin 45 mg/kg/day" is amoxicillin); the
    others in the ratio of a suspension's written strength ("600 mg/5 mL": 42.9 mg of
    clavulanate), else with no amount (their dose not checked: the formulation decides it)."""
    parts = {convention.single: order}
    strength = order.strength
    per5 = round(strength.value * 5 / strength.per_ml, 2) if strength and strength.per_ml and strength.mg else None
    others = convention.per_5ml.get(per5, {}) if per5 else {}
    for name in convention.ingredients:
        if name == convention.single:
            continue
        ratio = others[name] / per5 if name in others else None
        parts[name] = replace(order, dose=replace(order.dose, value=order.dose.value * ratio), strength=None) \
            if ratio else replace(order, dose=None, strength=None)
    return parts


def by_convention(order: Order, names: list[str]) -> dict[str, Order] | None:
    """One order per ingredient for a combination product written by convention, else None
    (see the module docstring)."""
    convention = convention_for(names)
    if convention is None or order is None:
        return None
    n = len(convention.ingredients)
    counted = order.dose is not None and order.dose.unit in order_words.FORMS
    # Parts written with a unit: "10/325 mg" as the dose (or the strength, with a count as the dose).
    for amount, is_dose in ((order.dose, True), (order.strength, False)):
        if amount is not None and len(amount.parts) == n and amount.unit == "mg" and amount.per_ml is None:
            mg = _assign(convention, amount.parts)
            if is_dose:
                return _per_dose(order, mg, amount.text)
            return _per_unit(order, mg, amount.text) if counted else None
    # An unlabelled "5/325" with a count of tablets: a strength per unit.
    found = [m for m in _PARTS.finditer(order.text) if len(re.split(r"\s*/\s*", m.group(1))) == n]
    if counted and order.strength is None and len(found) == 1:
        values = tuple(float(v) for v in re.split(r"\s*/\s*", found[0].group(1)))
        return _per_unit(order, _assign(convention, values), found[0].group(1))
    # A named strength ("Bactrim DS", "Tylenol #3") with a count of units.
    text = f" {' '.join(order.text.lower().split())} "
    for words, values in convention.named.items():
        if re.search(rf"(?<![\w#]){re.escape(words)}(?!\w)", text) and counted and order.strength is None:
            return _per_unit(order, dict(zip(convention.ingredients, values)), words)
    if convention.single and order.dose is not None and "/kg" in (order.dose.unit or ""):
        return _per_kg(convention, order)
    if convention.single and order.strength is not None and order.strength.per_ml and \
            order.dose is not None and order.dose.unit in order_words.VOLUME_ML:
        strength = order.strength  # a suspension's volume: "400 mg/5 mL, 5 mL"
        others = convention.per_5ml.get(round(strength.value * 5 / strength.per_ml, 2)) if strength.mg else None
        if others is None:
            return None
        parts = {convention.single: order}
        for name, mg5 in others.items():
            parts[name] = replace(order, strength=replace(strength, value=mg5, unit="mg", per_ml=5.0, parts=()))
        return parts
    # A single strength naming one ingredient ("Augmentin 875 mg"), the others from the product's strengths.
    if convention.single:
        for amount, is_dose in ((order.dose, True), (order.strength, False)):
            if amount is None or amount.parts or amount.mg is None or amount.per_ml is not None:
                continue
            others = convention.companions.get(amount.mg)
            if others is None or (not is_dose and not counted):
                return None
            mg = {convention.single: amount.mg, **others}
            return _per_dose(order, mg, amount.text) if is_dose else _per_unit(order, mg, amount.text)
    return None


__all__ = ["CONVENTIONS", "Convention", "by_convention", "convention_for"]
