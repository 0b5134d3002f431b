"""Dose checks of the medication safety gate: a parsed order against the curated adult dose
table (``data/dose_limits.tsv``) and the doses of the same ingredient already on the chart.

``dose_findings(order, ingredients, chart_orders, route=...) -> (findings, checked)``.

Invariants:
- The table is read once per process and validated as it is read: a bad row is a
  ``DoseTableError`` naming the file and line, never a silently skipped limit.
- Never silence: whatever code could not compare with the table (a combination whose amount is
  not written per ingredient, an unread dose or frequency, a weight-based dose, an ingredient or
  route with no row, a charted dose of the same ingredient it could not read) is a "not_checked"
  finding whose text starts "dose not checked: " and says why. ``checked`` is True only when
  every ingredient's dose was compared with every limit that applies. The one exception: no
  order at all (a drug named without a dosage, as in the gate's drug-only matrix) is
  ``([], False)`` with no finding.
- At most one finding per ingredient (per product for a combination that cannot be split): the
  worst reason wins, the others go in its evidence with the numbers and the row's source.
- Limits are adult limits, compared in mg. A charted product counts towards the day's (week's)
  total when it shares the ingredient and is given by a route the row covers. A combination is
  checked per ingredient when its strength is written one part per ingredient, in the order its
  name as written lists them ("hydrocodone/acetaminophen 5/325 mg"), or as its product's
  convention reads it (``combinations``: "Augmentin 875 mg", "Percocet 5/325 mg").
- Given the patient (``patient=``: age and charted weight), a dose per kg, and a child's dose,
  is also checked per kg (``weight.check_part``); the adult limits stay the absolute ones.
- A dose below the usual one over ``UNIT_SLIP`` (scaled down by a child's weight) is a likely
  unit slip: high, like a dose above the maximum.
- With no route given and limits that differ by route, the most permissive row is used and the
  evidence says so: a dose above it is above the limit by every route.
- Pure over its inputs; no logging (orders and charts are patient data).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from appliance.medication.orders import Order
from appliance.safety.chart import ChartMedication
from appliance.safety.classes import HIGH, MODERATE, fold
from appliance.safety.combinations import by_convention
from appliance.safety.report import Finding
from appliance.safety.tables import LOCAL_ROUTES, ROUTES, DoseTableError
from appliance.safety.weight import Patient, check_part

TABLE_PATH = Path(__file__).resolve().parent / "data" / "dose_limits.tsv"
COLUMNS = ("ingredient", "route", "max_single_mg", "max_daily_mg", "usual_single_mg", "schedule", "source")
SCHEDULES = ("daily", "weekly")
WEEKLY_MAX_PER_DAY = 2 / 7  # a weekly drug ordered more often than twice a week is on a daily regimen
TENFOLD = 10  # a dose this many times the usual one reads as a likely decimal-point error
UNIT_SLIP = 100  # a dose below the usual one over this reads as a unit slip (0.25 mcg of digoxin)
SOURCE = "curated dose table (appliance/safety/data/dose_limits.tsv)"
NOT_CHECKED = "dose not checked: "


@dataclass(frozen=True)
class DoseLimit:
    ingredient: str
    routes: tuple[str, ...]  # ("any",) or names from ROUTES
    max_single_mg: float
    max_daily_mg: float | None  # None only for a weekly drug with no daily regimen
    usual_single_mg: float
    schedule: str  # one of SCHEDULES
    source: str  # "citation: detail"
    line: int  # the row's line in the table file

    @property
    def weekly(self) -> bool:
        return self.schedule == "weekly"

    @property
    def cite(self) -> str:
        return self.source.split(":", 1)[0].strip()

    def covers(self, route: str | None) -> bool:
        """Whether the row applies to a dose given by ``route`` (None: not given, assumed so)."""
        if route is None:
            return True
        if self.routes == ("any",):
            return route.lower() not in LOCAL_ROUTES
        return route.lower() in {r.lower() for r in self.routes}


def _number(text: str, column: str, *, dash_ok: bool = False) -> float | None:
    if dash_ok and text == "-":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{column} {text!r} is not a positive number")
    return value


def _row(fields: list[str], line: int) -> DoseLimit:
    v = dict(zip(COLUMNS, (f.strip() for f in fields)))
    if not v["ingredient"] or fold(v["ingredient"]) != v["ingredient"]:
        raise ValueError(f"ingredient {v['ingredient']!r} is not a lower-case name as classes.fold writes it")
    routes = tuple(r.strip() for r in v["route"].split(","))
    if routes != ("any",) and not all(r in ROUTES for r in routes):
        raise ValueError(f"route {v['route']!r} is neither 'any' nor a comma-separated list of {', '.join(ROUTES)}")
    if v["schedule"] not in SCHEDULES:
        raise ValueError(f"schedule {v['schedule']!r} is not one of {', '.join(SCHEDULES)}")
    single = _number(v["max_single_mg"], "max_single_mg")
    daily = _number(v["max_daily_mg"], "max_daily_mg", dash_ok=v["schedule"] == "weekly")
    usual = _number(v["usual_single_mg"], "usual_single_mg")
    if usual > single:
        raise ValueError(f"usual_single_mg {usual:g} is above max_single_mg {single:g}")
    if v["schedule"] == "daily" and single > daily:
        raise ValueError(f"max_single_mg {single:g} is above max_daily_mg {daily:g} on a daily schedule")
    citation, _, detail = v["source"].partition(":")
    if not citation.strip() or not detail.strip():
        raise ValueError("source must read 'citation: detail'")
    return DoseLimit(v["ingredient"], routes, single, daily, usual, v["schedule"], v["source"], line)


def parse_table(text: str, name: str = "dose_limits.tsv") -> dict[str, tuple[DoseLimit, ...]]:
    """The rows by ingredient. Comment (#) and blank lines are skipped; the first other line is
    the header. Raises ``DoseTableError`` naming ``name`` and the line of a bad row."""
    table: dict[str, list[DoseLimit]] = {}
    header = False
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        fields = raw.split("\t")
        try:
            if not header:
                if tuple(f.strip() for f in fields) != COLUMNS:
                    raise ValueError(f"the header must be the columns {', '.join(COLUMNS)}, tab-separated")
                header = True
                continue
            if len(fields) != len(COLUMNS):
                raise ValueError(f"{len(fields)} tab-separated fields, expected {len(COLUMNS)}")
            limit = _row(fields, number)
            for other in table.get(limit.ingredient, []):
                if set(other.routes) & set(limit.routes):
                    raise ValueError(f"{limit.ingredient} by {','.join(limit.routes)} repeats line {other.line}")
        except ValueError as exc:
            raise DoseTableError(f"{name} line {number}: {exc}") from None
        table.setdefault(limit.ingredient, []).append(limit)
    if not header:
        raise DoseTableError(f"{name}: no header line")
    return {k: tuple(v) for k, v in table.items()}


@functools.cache
def dose_table() -> dict[str, tuple[DoseLimit, ...]]:
    """The shipped table, read and validated once per process."""
    return parse_table(TABLE_PATH.read_text(encoding="utf-8"), TABLE_PATH.name)


def limit_for(ingredient: str, route: str | None) -> tuple[DoseLimit | None, str | None]:
    """The row for ``ingredient`` by ``route``, and a note when the route was assumed. A named
    route's row wins over "any"; with no route given: the only row, else the "any" row, else the
    most permissive row (a dose above it is above the limit by every route)."""
    rows = dose_table().get(ingredient, ())
    if route is not None:
        found = [r for r in rows if r.routes != ("any",) and r.covers(route)] or [r for r in rows if r.covers(route)]
        return (found[0] if found else None), None
    if len(rows) <= 1 or any(r.routes == ("any",) for r in rows):
        return next((r for r in rows if len(rows) == 1 or r.routes == ("any",)), None), None
    loosest = max(rows, key=lambda r: (r.max_single_mg, r.max_daily_mg or 0))
    return loosest, f"route not given: compared with the {','.join(loosest.routes)} row, the most permissive"


def _num(value: float) -> str:
    return f"{value:,.3f}".rstrip("0").rstrip(".")


def _mg(value: float) -> str:
    return f"{_num(value * 1000)} mcg" if value < 1 else f"{_num(value)} mg"


def split_combination(order: Order, names: list[str]) -> dict[str, Order] | None:
    """One order per ingredient for a combination written with one strength per ingredient, in
    the order the drug's name as written lists them ("hydrocodone/acetaminophen 5/325 mg, 1 tab"),
    else None. A brand name ("Percocet 5/325") does not say the order of the parts: None."""
    written = f" {fold(order.drug_text)} "
    at = {n: written.find(f" {n} ") for n in names}
    if min(at.values()) < 0 or len(set(at.values())) != len(names):
        return None
    field = next((f for f in ("dose", "strength") if getattr(order, f) and len(getattr(order, f).parts) == len(names)),
                 None)
    if field is None:
        return None
    whole = getattr(order, field)
    return {n: replace(order, **{field: replace(whole, value=part, low=None, parts=())})
            for n, part in zip(sorted(names, key=at.__getitem__), whole.parts)}


def _names(ingredients: frozenset[str], order: Order) -> frozenset[str]:
    """The ingredients, with the parts of a combination the recogniser named in the order
    ("piperacillin-tazobactam"), or the order's generic when no ingredient is known."""
    parts = frozenset(p for p in (order.generic or "").split("-") if p)
    names = ingredients | parts if len(parts) > 1 else ingredients or parts
    # One drug named twice, less and more precisely ("penicillin", "penicillin v"), is one ingredient.
    return frozenset(n for n in names if not any(o.startswith(n + " ") for o in names))


def _amount(order: Order, week: bool) -> float | None:
    """Mg a day (a week) at the most the order allows; a one-time order is its one dose."""
    if order.one_time:
        return order.mg_per_dose()
    per_day = order.mg_per_day()
    return None if per_day is None else per_day * (7 if week else 1)


def _charted(ingredient: str, limit: DoseLimit, chart_orders: list[tuple[ChartMedication, Order]], week: bool
             ) -> tuple[list[tuple[ChartMedication, float]], list[str]]:
    """Active chart products with the ingredient, by a route the row covers: (product, mg a
    period) for those read, and the names of those whose amount of it could not be read."""
    read, unread = [], []
    for med, charted in chart_orders:
        names = _names(med.ingredients, charted)
        if ingredient not in names or not limit.covers(charted.route):
            continue
        if len(names) > 1:
            charted = (split_combination(charted, sorted(names)) or {}).get(ingredient)
        amount = _amount(charted, week) if charted is not None else None
        if amount is None:
            unread.append(med.name)
        else:
            read.append((med, amount))
    return read, unread


def _unread(order: Order, ingredient: str, what: str | None = None) -> str:
    """Why code could not read the dose (``what`` None) or the frequency for ``what``."""
    if what is None:
        amount = order.dose or order.strength
        if amount is None:
            return f"the order gives no amount of {ingredient}"
        if "/kg" in (amount.unit or "") or "/m2" in (amount.unit or ""):
            return f"'{amount.text}' is a weight-based dose (the table holds adult limits in mg)"
        return f"'{amount.text}' could not be read as mg of {ingredient}"
    if order.frequency_text:
        return f"the frequency '{order.frequency_text}' could not be read, so the {what} not compared"
    gap = "an as-needed order with no frequency or maximum" if order.as_needed else "the order gives no frequency"
    return f"{gap}, so the {what} not compared"


def _check(ingredient: str, order: Order, chart_orders: list[tuple[ChartMedication, Order]],
           route: str | None, scale: float = 1.0) -> tuple[Finding | None, bool]:
    """One ingredient's finding (or None) and whether every limit that applies was compared.
    ``scale`` (at most 1: a child's weight over an adult's) lowers the usual dose a far-too-small
    dose is compared with."""
    where = route or order.route
    limit, note = limit_for(ingredient, where)
    ordered = {"text": order.text, "dose": order.dosage_text, "frequency": order.frequency_text,
               "route": where, "per_day": order.per_day, "as_needed": order.as_needed, "one_time": order.one_time}
    if limit is None:
        why = f" for the {where} route" if dose_table().get(ingredient) else ""
        return Finding("not_checked", MODERATE, f"{NOT_CHECKED}{ingredient} has no row{why} in the dose table",
                       {"ingredient": ingredient, "ordered": ordered}, SOURCE), False
    cite = f"(source: {limit.cite})"
    highs: list[str] = []  # worst first: schedule, single dose, total
    gaps: list[str] = []  # what was not compared, and why
    per_dose = order.mg_per_dose()
    ordered["mg_per_dose"] = per_dose
    evidence: dict[str, Any] = {"ingredient": ingredient, "ordered": ordered, "limit": asdict(limit)}
    if note:
        evidence["route_note"] = note

    # A weekly drug more often than twice a week is on a daily regimen; none exists for some.
    on_daily = bool(order.per_day and order.per_day > WEEKLY_MAX_PER_DAY + 1e-9 and not order.one_time)
    frequency = order.frequency_text or (f"{_num(order.per_day)} times a day" if order.per_day else "")
    if limit.weekly and on_daily and limit.max_daily_mg is None:
        highs.append(f"{ingredient} is taken once weekly; ordered {frequency} ({_num(order.per_day * 7)} doses "
                     f"a week): a known fatal error {cite}")
    if per_dose is None:
        gaps.append(_unread(order, ingredient))
    elif per_dose > limit.max_single_mg:
        tenfold = (f", {_num(per_dose / limit.usual_single_mg)} times the usual {_mg(limit.usual_single_mg)}: "
                   "a likely 10x error" if per_dose >= TENFOLD * limit.usual_single_mg else "")
        highs.append(f"{ingredient} {_mg(per_dose)} per dose is above the maximum single dose of "
                     f"{_mg(limit.max_single_mg)}{tenfold} {cite}")
    elif per_dose < limit.usual_single_mg * scale / UNIT_SLIP:
        highs.append(f"{ingredient} {_mg(per_dose)} per dose is far below any usual dose (usual "
                     f"{_mg(limit.usual_single_mg)}): a likely unit slip (mcg for mg?) {cite}")

    # The total over the row's period, with the chart: a week for a weekly drug taken weekly.
    week = limit.weekly and not on_daily
    period, ceiling = ("week", limit.max_single_mg) if week else ("day", limit.max_daily_mg)
    own = _amount(order, week) if per_dose is not None else None
    if per_dose is None:
        if limit.weekly and not order.per_day and not order.one_time:
            gaps.append(_unread(order, ingredient, "weekly schedule was"))
    elif own is None:
        gaps.append(_unread(order, ingredient, "weekly schedule and total were" if week else "daily total was"))
    elif ceiling is not None:  # None: a daily order of a weekly-only drug, reported above
        read, unread = _charted(ingredient, limit, chart_orders, week)
        total = own + sum(amount for _, amount in read)
        evidence.update(period=period, ordered_mg=own, total_mg=total,
                        charted=[{"medication": m.evidence, f"mg_per_{period}": a} for m, a in read])
        if unread:
            evidence["charted_unread"] = unread
        # The clinician's words for a dose in mg, else the mg code read ("2 tablets" of 500 mg).
        written = order.dose is not None and order.dose.mg is not None and "/" not in order.dose.text
        wording = f"{ingredient} {order.dosage_text if written else _mg(per_dose) + ' a dose'} {frequency}".strip()
        if read:
            names = ", ".join(" ".join(f"{m.name} {m.row.get('dosage') or ''} {m.row.get('frequency') or ''}".split())
                              for m, _ in read)
            head = f"{wording} ({_mg(own)} a {period}), with {names} already charted, {_mg(total)} a {period}"
        else:
            head = f"{wording} is {_mg(total)} a {period}"
        if total > ceiling:
            regimen = " on a daily regimen" if limit.weekly else ""
            highs.append(f"{head}:{' at least' if unread else ''} above the maximum of {_mg(ceiling)} a "
                         f"{period}{regimen} {cite}")
        elif unread:
            gaps.append(f"the {period}'s total with {', '.join(unread)} already charted could not be read")

    if highs:
        evidence["other_reasons"] = highs[1:] + [NOT_CHECKED + g for g in gaps]
        return Finding("dose", HIGH, highs[0], evidence, SOURCE), not gaps
    if gaps:
        return Finding("not_checked", MODERATE, NOT_CHECKED + "; ".join(gaps), evidence, SOURCE), False
    return None, True


def order_parts(order: Order, ingredients: frozenset[str]) -> tuple[list[str], dict[str, Order] | None]:
    """(the ingredients, one order per ingredient or None when the amount is not written per
    ingredient): a single ingredient's order as it is; a combination split as its name lists the
    parts, else by the product's convention (``combinations.by_convention``)."""
    names = sorted(_names(ingredients, order))
    if len(names) == 1:
        return names, {names[0]: order}
    return names, (split_combination(order, names) or by_convention(order, names)) if names else None


def dose_findings(order: Order | None, ingredients: frozenset[str],
                  chart_orders: list[tuple[ChartMedication, Order]], *, route: str | None = None,
                  patient: Patient | None = None) -> tuple[list[Finding], bool]:
    """Dose findings for one prescription: ``order`` as parsed, the drug's ``ingredients``, and
    the patient's active medications each with its parsed order. ``route`` (when the caller
    knows it, e.g. the prescribing tool's argument) wins over the order's. Returns the findings
    and whether every ingredient's dose was compared with the table (see the module docstring)."""
    if order is None:
        return [], False
    names, parts = order_parts(order, ingredients)
    if parts is None:
        product = order.generic or order.drug_text or "the drug"
        why = (f"{product} is a combination ({', '.join(names)}) and the order's amount is not written per "
               "ingredient" if names else f"no ingredient of {product} was recognised")
        return [Finding("not_checked", MODERATE, NOT_CHECKED + why, {"ingredients": names, "order": order.text},
                        SOURCE)], False
    findings, checked = [], True
    for name, part in parts.items():
        if patient is None:
            finding, complete = _check(name, part, chart_orders, route)
        else:  # by weight where it applies, with the adult limits as the absolute ones
            finding, complete = check_part(name, part, patient,
                                           lambda o, scale, n=name: _check(n, o, chart_orders, route, scale), route)
        findings += [finding] if finding else []
        checked = checked and complete
    return findings, checked


__all__ = [
    "COLUMNS", "LOCAL_ROUTES", "ROUTES", "SCHEDULES", "SOURCE", "TABLE_PATH", "DoseLimit", "DoseTableError",
    "dose_findings", "dose_table", "limit_for", "order_parts", "parse_table", "split_combination",
]
