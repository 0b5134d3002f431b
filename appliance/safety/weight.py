"""Weight-based dose checks: a dose written per kg, or a child's dose in mg, against the
patient's charted weight and the per-kg limits of ``data/pediatric_limits.tsv``.

``check_part(ingredient, order, patient, adult_check, route)`` -> (finding or None, checked).
``adult_check`` is the adult table's check (``doses._check``) of an order in mg: a dose per kg is
converted with the charted weight and then checked against both the per-kg row and the
absolute adult limits, so no child's dose passes above the adult maximum.

Invariants:
- A dose per kg with no charted weight (or a daily dose per kg with no frequency to divide it
  by) is never compared with anything: a "not_checked" finding (moderate) saying why. The
  weight is the chart's latest (``chart.body_weight``), never a default.
- A plain mg dose for a patient under ``PAEDIATRIC_AGE`` who weighs less than ``ADULT_DOSE_KG``
  is divided by the charted weight and compared with the ingredient's per-kg row too (from 40 kg
  the labels give adult doses: amoxicillin, Augmentin, cephalexin); under ``WEIGHT_REQUIRED_AGE``
  with no weight charted (or with no per-kg row for the ingredient) that comparison is "not
  checked" (moderate), from then to 18 an info note.
- One finding per ingredient: the worst reason leads, the others are kept in its evidence.
- The table is read once and validated as read: a bad row is a ``DoseTableError`` naming its line.
- Pure; no logging (the weight and the order are patient data).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from appliance.medication.orders import MASS_MG, Amount, Order
from appliance.safety.chart import Weight
from appliance.safety.classes import HIGH, INFO, MODERATE, fold
from appliance.safety.report import SEVERITIES, Finding
from appliance.safety.tables import LOCAL_ROUTES, ROUTES, DoseTableError

TABLE_PATH = Path(__file__).resolve().parent / "data" / "pediatric_limits.tsv"
COLUMNS = ("ingredient", "route", "max_mg_per_kg_dose", "max_mg_per_kg_day", "source")
SOURCE = "curated per-kg table (appliance/safety/data/pediatric_limits.tsv)"
NOT_CHECKED = "dose not checked: "
PAEDIATRIC_AGE = 18
WEIGHT_REQUIRED_AGE = 12  # under this age a dose is not checked without a charted weight
ADULT_DOSE_KG = 40  # from this weight a child's plain mg dose is held to the adult limits only
DAILY_TAILS = ("/kg/day", "/kg/24h", "/kg/d")


@dataclass(frozen=True)
class Patient:
    age: int | None
    weight: Weight | None


@dataclass(frozen=True)
class PerKgLimit:
    ingredient: str
    routes: tuple[str, ...]
    max_dose: float  # mg/kg a dose
    max_day: float  # mg/kg a day
    source: str
    line: int

    @property
    def cite(self) -> str:
        return self.source.split(":", 1)[0].strip()


def _positive(text: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{column} {text!r} is not a positive number")
    return value


def parse_table(text: str, name: str = "pediatric_limits.tsv") -> dict[str, tuple[PerKgLimit, ...]]:

    table: dict[str, list[PerKgLimit]] = {}
    header = False
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in raw.split("\t")]
        try:
            if not header:
                if tuple(fields) != COLUMNS:
                    raise ValueError(f"the header must be the columns {', '.join(COLUMNS)}, tab-separated")
                header = True
                continue
            if len(fields) != len(COLUMNS):
                raise ValueError(f"{len(fields)} tab-separated fields, expected {len(COLUMNS)}")
            v = dict(zip(COLUMNS, fields))
            if not v["ingredient"] or fold(v["ingredient"]) != v["ingredient"]:
                raise ValueError(f"ingredient {v['ingredient']!r} is not a lower-case name as classes.fold writes it")
            routes = tuple(r.strip() for r in v["route"].split(","))
            if routes != ("any",) and not all(r in ROUTES for r in routes):
                raise ValueError(f"route {v['route']!r} is neither 'any' nor a list of known routes")
            dose, day = _positive(v["max_mg_per_kg_dose"], "max_mg_per_kg_dose"), _positive(
                v["max_mg_per_kg_day"], "max_mg_per_kg_day")
            if dose > day:
                raise ValueError(f"max_mg_per_kg_dose {dose:g} is above max_mg_per_kg_day {day:g}")
            citation, _, detail = v["source"].partition(":")
            if not citation.strip() or not detail.strip():
                raise ValueError("source must read 'citation: detail'")
            limit = PerKgLimit(v["ingredient"], routes, dose, day, v["source"], number)
            if any(set(o.routes) & set(routes) for o in table.get(limit.ingredient, [])):
                raise ValueError(f"{limit.ingredient} by {v['route']} is listed twice")
        except ValueError as exc:
            raise DoseTableError(f"{name} line {number}: {exc}") from None
        table.setdefault(limit.ingredient, []).append(limit)
    if not header:
        raise DoseTableError(f"{name}: no header line")
    return {k: tuple(v) for k, v in table.items()}


@functools.cache
def per_kg_table() -> dict[str, tuple[PerKgLimit, ...]]:
    return parse_table(TABLE_PATH.read_text(encoding="utf-8"), TABLE_PATH.name)


def per_kg_limit(ingredient: str, route: str | None) -> PerKgLimit | None:
    """The row for the route (a named route's row before "any"); with no route given, the most
    permissive row (a dose above it is above the limit by every route)."""
    rows = per_kg_table().get(ingredient, ())
    if route is None:
        return max(rows, key=lambda r: (r.max_dose, r.max_day), default=None)
    low = route.lower()
    named = [r for r in rows if low in {x.lower() for x in r.routes}]
    return (named or [r for r in rows if r.routes == ("any",)] or [None])[0]


def per_kg_unit(amount: Amount | None) -> tuple[float, bool] | None:
    """(mg per unit of mass, whether per day) for a dose written per kg ("mg/kg", "mcg/kg/day")."""
    if amount is None or not amount.unit or "/kg" not in amount.unit:
        return None
    mass, _, tail = amount.unit.partition("/")
    if mass not in MASS_MG or f"/{tail}" not in ("/kg",) + DAILY_TAILS:
        return None
    return MASS_MG[mass], f"/{tail}" in DAILY_TAILS


def _num(value: float) -> str:
    return f"{value:,.3f}".rstrip("0").rstrip(".")


def to_mg(order: Order, kg: float) -> Order | None:
    """The order with its per-kg dose as mg a dose for ``kg``; None when a daily dose per kg has
    no frequency to divide it by, or the dose is not per kg."""
    read = per_kg_unit(order.dose)
    if read is None:
        return None
    factor, daily = read
    mg = order.dose.value * factor * kg
    if daily:
        if not order.per_day:
            return None
        mg /= order.per_day
    return replace(order, dose=replace(order.dose, value=mg, unit="mg", low=None, parts=()), strength=None)


def _per_kg_finding(ingredient: str, order: Order, weight: Weight, route: str | None, child: bool
                    ) -> tuple[Finding | None, bool]:
    """The order in mg against the per-kg row for the charted weight."""
    where = route or order.route
    limit = per_kg_limit(ingredient, where)
    kg = weight.kg
    evidence = {"ingredient": ingredient, "weight": weight.evidence, "weight_kg": round(kg, 2)}
    if limit is None:
        if not child:
            return None, True  # an adult's dose per kg: the absolute adult limits decide
        text = f"{NOT_CHECKED}{ingredient} has no per-kg row{f' for the {where} route' if where else ''} " \
               "in the weight-based table (a child's dose is checked per kg)"
        return Finding("not_checked", MODERATE, text, evidence, SOURCE), False
    per_dose = order.mg_per_dose()
    per_day = order.mg_per_day() if not order.one_time else per_dose
    evidence["limit"] = {"max_mg_per_kg_dose": limit.max_dose, "max_mg_per_kg_day": limit.max_day,
                         "source": limit.source}
    cite = f"(source: {limit.cite})"
    highs, gaps = [], []
    if per_dose is None:
        gaps.append(f"the amount of {ingredient} a dose could not be read")
    else:
        evidence["mg_per_kg_dose"] = round(per_dose / kg, 3)
        if per_dose / kg > limit.max_dose * 1.0001:
            times = per_dose / kg / limit.max_dose
            scale = f", {_num(times)} times it" if times >= 2 else ""
            highs.append(f"{ingredient} {_num(per_dose / kg)} mg/kg a dose ({_num(per_dose)} mg for {_num(kg)} kg) "
                         f"is above the maximum of {_num(limit.max_dose)} mg/kg a dose{scale} {cite}")
    if per_day is None:
        if per_dose is not None:
            gaps.append(f"the frequency was not read, so {ingredient}'s mg/kg a day was not compared")
    else:
        evidence["mg_per_kg_day"] = round(per_day / kg, 3)
        if per_day / kg > limit.max_day * 1.0001:
            highs.append(f"{ingredient} {_num(per_day / kg)} mg/kg a day ({_num(per_day)} mg for {_num(kg)} kg) "
                         f"is above the maximum of {_num(limit.max_day)} mg/kg a day {cite}")
    if highs:
        evidence["other_reasons"] = highs[1:] + [NOT_CHECKED + g for g in gaps]
        return Finding("dose", HIGH, highs[0], evidence, SOURCE), not gaps
    if gaps:
        return Finding("not_checked", MODERATE, NOT_CHECKED + "; ".join(gaps), evidence, SOURCE), False
    return None, True


def merge(findings: list[Finding | None]) -> Finding | None:
    """One finding from several about one ingredient: the worst leads (a dose finding before a
    not-checked one at equal severity), the others' texts go in its evidence."""
    found = [f for f in findings if f is not None]
    if not found:
        return None
    found.sort(key=lambda f: (SEVERITIES.index(f.severity), f.kind != "dose"))
    lead, rest = found[0], found[1:]
    if not rest:
        return lead
    others = list(lead.evidence.get("other_reasons", [])) + [f.text for f in rest]
    return replace(lead, evidence={**lead.evidence, "other_reasons": others,
                                   "other_sources": sorted({f.source for f in rest} - {lead.source})})


def check_part(ingredient: str, order: Order, patient: Patient,
               adult_check: Callable[[Order, float], tuple[Finding | None, bool]], route: str | None
               ) -> tuple[Finding | None, bool]:
    """One ingredient's dose, by weight where it applies (see the module docstring).
    ``adult_check(order_in_mg, scale)`` is the adult table's check; ``scale`` (at most 1) is the
    weight's share of an adult's, for the far-below-usual comparison."""
    child = patient.age is not None and patient.age < PAEDIATRIC_AGE
    weight = patient.weight
    scale = min(1.0, weight.kg / 70) if weight is not None else (0.05 if child else 1.0)
    if per_kg_unit(order.dose) is not None:
        if weight is None:
            text = f"{NOT_CHECKED}'{order.dose.text}' of {ingredient} is a weight-based dose and no weight is charted"
            return Finding("not_checked", MODERATE, text, {"ingredient": ingredient, "order": order.text},
                           SOURCE), False
        in_mg = to_mg(order, weight.kg)
        if in_mg is None:
            text = (f"{NOT_CHECKED}'{order.dose.text}' of {ingredient} is a daily dose per kg and the order gives "
                    "no frequency to divide it by")
            return Finding("not_checked", MODERATE, text, {"ingredient": ingredient, "order": order.text},
                           SOURCE), False
        adult, adult_ok = adult_check(in_mg, scale)
        per_kg, kg_ok = _per_kg_finding(ingredient, in_mg, weight, route, child)
        return merge([per_kg, adult]), adult_ok and kg_ok
    adult, adult_ok = adult_check(order, scale)
    if not child or (route or order.route or "").lower() in LOCAL_ROUTES:
        return adult, adult_ok
    if weight is None:
        severity = MODERATE if patient.age < WEIGHT_REQUIRED_AGE else INFO
        text = f"{NOT_CHECKED}no weight is charted, so {ingredient}'s dose was not checked per kg for a child"
        return merge([adult, Finding("not_checked", severity, text, {"ingredient": ingredient}, SOURCE)]), \
            adult_ok and severity == INFO
    no_row = per_kg_table().get(ingredient) is None
    if weight.kg >= ADULT_DOSE_KG or (no_row and patient.age >= WEIGHT_REQUIRED_AGE):
        return adult, adult_ok  # adult-sized, or an adolescent's dose of a drug with no per-kg row
    per_kg, kg_ok = _per_kg_finding(ingredient, order, weight, route, True)
    return merge([adult, per_kg]), adult_ok and kg_ok


__all__ = [
    "ADULT_DOSE_KG", "COLUMNS", "PAEDIATRIC_AGE", "SOURCE", "TABLE_PATH", "WEIGHT_REQUIRED_AGE", "Patient",
    "PerKgLimit", "check_part", "merge", "parse_table", "per_kg_limit", "per_kg_table", "per_kg_unit", "to_mg",
]
