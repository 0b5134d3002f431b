"""Regimen checks of the medication safety gate: opioid frequency and daily morphine milligram
equivalents (MME), and course length where the label gives one (``data/course_limits.tsv``).

``regimen_findings(parts, chart_orders, route) -> list[Finding]``: ``parts`` is one order per
ingredient in mg (a dose per kg already converted with the charted weight, ``doses.order_parts``
and ``weight.to_mg``); ``chart_orders`` the active medications with their parsed orders.

Choices (each finding's text names its source):
- MME a day: the CDC 2022 conversion factors (``MME_FACTORS``) for oral (or unstated) routes,
  the order's most a day plus the opioids already charted that code can read. With no other
  opioid on the chart (opioid-naive) above ``HIGH_MME`` (90) is high and from ``CAUTION_MME``
  (50) moderate; a patient already on an opioid gets moderate above 90 (tolerance is possible,
  the risk stays).
- Frequency: an oral opioid more often than every 3 hours is high, every 3 hours moderate (the
  labels' immediate-release interval is every 4-6 hours); an extended-release product more often
  than every 8 hours is high; a parenteral opioid more often than every 2 hours is high.
- Course: a written duration beyond the row's days is the row's severity; amounts above a row's
  daily bound with no duration written are moderate (short courses only). An opioid-naive
  course beyond 7 days is moderate (CDC 2022: acute pain rarely needs more).
Invariants: pure; one finding per ingredient and concern (frequency, MME, course), kind
"dose"; the table is validated as read (``DoseTableError`` naming the line); no logging.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from appliance.medication.orders import Order
from appliance.safety.chart import ChartMedication
from appliance.safety.classes import HIGH, MODERATE, classes_of, fold
from appliance.safety.report import Finding
from appliance.safety.tables import ROUTES, DoseTableError

CDC = "CDC Clinical Practice Guideline for Prescribing Opioids for Pain, 2022 (MMWR Recomm Rep 71(3))"
# CDC 2022, Table: MME conversion factors for oral opioids (mg to morphine mg equivalents).
MME_FACTORS = {"codeine": 0.15, "dihydrocodeine": 0.25, "hydrocodone": 1.0, "hydromorphone": 5.0, "methadone": 4.7,
               "morphine": 1.0, "oxycodone": 1.5, "oxymorphone": 3.0, "tapentadol": 0.4, "tramadol": 0.2}
HIGH_MME = 90
CAUTION_MME = 50
NAIVE_COURSE_DAYS = 7
PARENTERAL = frozenset({"iv", "im", "subcutaneous"})
EXTENDED = re.compile(r"\b(?:er|xr|sr|cr|la|extended|sustained|controlled|contin|oxycontin|hysingla|zohydro|"
                      r"nucynta er|long acting)\b", re.I)
TABLE_PATH = Path(__file__).resolve().parent / "data" / "course_limits.tsv"
COLUMNS = ("ingredient", "route", "above_mg_per_day", "max_days", "severity", "source")
SOURCE = "curated regimen rules (appliance/safety/regimen.py, data/course_limits.tsv)"


@dataclass(frozen=True)
class CourseLimit:
    ingredient: str
    routes: tuple[str, ...]
    above_mg_per_day: float
    max_days: float
    severity: str
    source: str

    @property
    def cite(self) -> str:
        return self.source.split(":", 1)[0].strip()

    def covers(self, route: str | None) -> bool:
        return route is None or self.routes == ("any",) or route.lower() in {r.lower() for r in self.routes}


def parse_table(text: str, name: str = "course_limits.tsv") -> dict[str, tuple[CourseLimit, ...]]:
    table: dict[str, list[CourseLimit]] = {}
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
            above, days = float(v["above_mg_per_day"]), float(v["max_days"])
            if not (above >= 0 and days > 0) or max(above, days) == float("inf"):
                raise ValueError("above_mg_per_day must be 0 or more and max_days above 0")
            if v["severity"] not in (HIGH, MODERATE):
                raise ValueError(f"severity {v['severity']!r} is neither {HIGH} nor {MODERATE}")
            if not all(p.strip() for p in v["source"].partition(":")[::2]):
                raise ValueError("source must read 'citation: detail'")
        except ValueError as exc:
            raise DoseTableError(f"{name} line {number}: {exc}") from None
        table.setdefault(v["ingredient"], []).append(CourseLimit(v["ingredient"], routes, above, days, v["severity"],
                                                                 v["source"]))
    if not header:
        raise DoseTableError(f"{name}: no header line")
    return {k: tuple(v) for k, v in table.items()}


@functools.cache
def course_table() -> dict[str, tuple[CourseLimit, ...]]:
    return parse_table(TABLE_PATH.read_text(encoding="utf-8"), TABLE_PATH.name)


def _num(value: float) -> str:
    return f"{value:,.1f}".rstrip("0").rstrip(".")


def _hours(per_day: float) -> str:
    return f"every {_num(24 / per_day)} hours"


def _oral(route: str | None) -> bool:
    return (route or "oral").lower() not in PARENTERAL | {"transdermal", "topical", "inhaled", "intranasal"}


def _mme(ingredient: str, order: Order, route: str | None) -> float | None:
    factor = MME_FACTORS.get(ingredient)
    per_day = order.mg_per_day() if not order.one_time else order.mg_per_dose()
    if factor is None or per_day is None or not _oral(route or order.route):
        return None
    return per_day * factor


def _opioids_on_chart(chart_orders: list[tuple[ChartMedication, Order]]) -> list[tuple[ChartMedication, float | None]]:
    """Active charted opioids, each with its MME a day when code can read it."""
    out = []
    for med, charted in chart_orders:
        if "opioids" not in classes_of(med.ingredients):
            continue
        amounts = [_mme(i, charted, None) for i in sorted(med.ingredients) if i in MME_FACTORS]
        known = [a for a in amounts if a is not None]
        out.append((med, sum(known) if known and len(known) == len(amounts) else None))
    return out


def _frequency(ingredient: str, order: Order, route: str | None) -> Finding | None:
    per_day = order.per_day
    if ingredient not in MME_FACTORS or not per_day or order.one_time:
        return None
    where = (route or order.route or "").lower()
    words = order.frequency_text or _hours(per_day)
    evidence = {"ingredient": ingredient, "per_day": per_day, "route": where or None}
    if where in PARENTERAL:
        if per_day > 12 + 1e-9:
            return Finding("dose", HIGH, f"{ingredient} {words} ({_hours(per_day)}) by the {where} route: more "
                           "often than every 2 hours (curator's bound for parenteral opioid doses)", evidence, SOURCE)
        return None
    if EXTENDED.search(f" {order.drug_text or ''} {order.text} ") and per_day > 3 + 1e-9:
        return Finding("dose", HIGH, f"{ingredient} extended-release {words}: more often than every 8 hours "
                       "(the extended-release labels give every 8-12 hours or once daily)", evidence, SOURCE)
    if per_day > 8 + 1e-9:
        return Finding("dose", HIGH, f"{ingredient} {words}: an opioid more often than every 3 hours (the labels' "
                       "immediate-release interval is every 4-6 hours)", evidence, SOURCE)
    if per_day > 6 + 1e-9:
        return Finding("dose", MODERATE, f"{ingredient} {words}: an opioid more often than every 4 hours (the "
                       "labels' immediate-release interval is every 4-6 hours)", evidence, SOURCE)
    return None


def _course(ingredient: str, order: Order, route: str | None, naive: bool) -> Finding | None:
    days = order.duration_days
    per_day = order.mg_per_day()
    where = route or order.route
    for limit in course_table().get(ingredient, ()):
        below = limit.above_mg_per_day and (per_day is None or per_day <= limit.above_mg_per_day)
        if not limit.covers(where) or below:
            continue
        amount = f"{_num(per_day)} mg a day" if per_day is not None else "the order"
        bound = f" above {_num(limit.above_mg_per_day)} mg a day" if limit.above_mg_per_day else ""
        evidence = {"ingredient": ingredient, "mg_per_day": per_day, "days": days, "limit": limit.source}
        if days is not None and days > limit.max_days:
            return Finding("dose", limit.severity, f"{ingredient} {amount} for {_num(days)} days: courses{bound} "
                           f"are at most {_num(limit.max_days)} days (source: {limit.cite})", evidence, SOURCE)
        if days is None and limit.above_mg_per_day:
            return Finding("dose", MODERATE, f"{ingredient} {amount} is above the usual {_num(limit.above_mg_per_day)} "
                           f"mg a day: short courses only, at most {_num(limit.max_days)} days (source: {limit.cite})",
                           evidence, SOURCE)
    if ingredient in MME_FACTORS and naive and days is not None and days > NAIVE_COURSE_DAYS:
        return Finding("dose", MODERATE, f"{ingredient} for {_num(days)} days with no opioid on the chart: acute pain "
                       f"rarely needs more than {NAIVE_COURSE_DAYS} days (source: {CDC})",
                       {"ingredient": ingredient, "days": days}, SOURCE)
    return None


def regimen_findings(parts: dict[str, Order], chart_orders: list[tuple[ChartMedication, Order]],
                     route: str | None = None) -> list[Finding]:
    """See the module docstring."""
    findings: list[Finding] = []
    charted = _opioids_on_chart(chart_orders)
    naive = not charted
    ordered = {i: _mme(i, o, route) for i, o in parts.items() if i in MME_FACTORS}
    for ingredient, order in parts.items():
        findings += [f for f in (_frequency(ingredient, order, route), _course(ingredient, order, route, naive)) if f]
    own = [m for m in ordered.values() if m is not None]
    if own:
        mme = sum(own) + sum(m for _, m in charted if m is not None)
        with_chart = [f"{med.name} ({_num(m)} MME)" for med, m in charted if m is not None]
        names = ", ".join(f"{i} {_num(parts[i].mg_per_day() or 0)} mg a day" for i in ordered if ordered[i] is not None)
        head = f"{names}{' with ' + ', '.join(with_chart) if with_chart else ''}: {_num(mme)} MME a day"
        evidence = {"mme_per_day": round(mme, 1), "factors": {i: MME_FACTORS[i] for i in ordered},
                    "charted": [{"medication": med.evidence, "mme_per_day": m} for med, m in charted]}
        if mme > HIGH_MME and naive:
            findings.append(Finding("dose", HIGH, f"{head}, above {HIGH_MME} MME a day with no opioid on the chart "
                                    f"(opioid-naive) (source: {CDC})", evidence, SOURCE))
        elif mme > HIGH_MME:
            findings.append(Finding("dose", MODERATE, f"{head}, above {HIGH_MME} MME a day: justify and offer "
                                    f"naloxone (source: {CDC})", evidence, SOURCE))
        elif mme >= CAUTION_MME and naive:
            findings.append(Finding("dose", MODERATE, f"{head}: {CAUTION_MME} MME a day or more raises overdose risk "
                                    f"for an opioid-naive patient (source: {CDC})", evidence, SOURCE))
    return findings


__all__ = ["CAUTION_MME", "CDC", "HIGH_MME", "MME_FACTORS", "CourseLimit", "course_table", "parse_table",
           "regimen_findings"]
