"""A clinician's medication order, parsed by code: drug, strength, dose, unit, route, frequency,
as-needed with its maximum, and duration ("Prescribe amoxicillin 500 mg PO three times daily",
"1 tab PO BID", "2 puffs q4-6h prn max 8/day", "methotrexate 15 mg once weekly"), the way a CPOE
system reads a sig. The vocabulary is in ``order_words``.

Invariants:
- ``parse_order`` never raises, on any text; what it cannot read stays None (never a guess).
- Every ``*_text`` field and every ``Amount.text`` is an exact substring of ``Order.text``, so an
  argument filled from it is the clinician's own words.
- Patient IDs ("pat-006"), dates, times and ages are masked before amounts and frequencies are
  read: their digits are never a dose.
- The drug is the first mention the drug recogniser finds (brands resolve to generics).
- A frequency range ("q4-6h") counts at the most it allows (every 4 hours: 6 a day); an
  as-needed maximum caps the daily amount when it is lower.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from appliance.medication import order_words as w

# Units as the parser writes them (normalised): mass units convert through ``MASS_MG``.
MASS_MG = {"g": 1000.0, "mg": 1.0, "mcg": 0.001, "ng": 0.000001}
MAX_TEXT = 10_000  # characters read; a longer message is read up to here


@dataclass(frozen=True)
class Amount:
    """A quantity as written and as read: "500 mg", "1-2 tablets", "2 puffs", "250 mg/5 mL"."""

    text: str  # exactly as written in the order (a substring of ``Order.text``)
    value: float  # the upper bound of a range ("1-2 tablets": 2)
    low: float | None  # the lower bound of a range, else None
    unit: str | None  # normalised (``order_words.UNITS``); per-weight units as "mg/kg"; None: no unit
    parts: tuple[float, ...] = ()  # a combination strength "50/1000 mg": one value per ingredient
    per_ml: float | None = None  # a concentration "250 mg/5 mL": the volume the value is in
    span: tuple[int, int] = (0, 0)  # where ``text`` stands in ``Order.text``

    @property
    def mg(self) -> float | None:
        """The amount in milligrams when its unit is a mass (and it is one value), else None."""
        if self.unit not in MASS_MG or len(self.parts) > 1:
            return None
        return self.value * MASS_MG[self.unit]


@dataclass(frozen=True)
class Order:
    """One order read from text (see the module docstring)."""

    text: str  # the text parsed
    drug_text: str | None  # the drug as written ("Zosyn", "MS Contin", "amoxicillin")
    generic: str | None  # the recogniser's generic name ("piperacillin-tazobactam", "morphine")
    strength: Amount | None  # per unit of form, or a concentration: "500 mg tablets", "250 mg/5 mL"
    dose: Amount | None  # per administration: "2 tabs"; "500 mg"; "10 mL"
    route: str | None  # normalised: oral, sublingual, IV, IM, subcutaneous, inhaled, intranasal, topical,
    # transdermal, rectal, vaginal, ophthalmic, otic
    route_text: str | None
    frequency_text: str | None  # as written: "three times daily", "q8h", "BID", "once weekly", "at night"
    per_day: float | None  # administrations per day, the most the order allows (q4-6h -> 6; weekly -> 1/7)
    as_needed: bool
    max_per_day: Amount | None  # "max 8/day" -> 8, unit None; "max 3 g/day" -> 3 g; "4 doses" -> unit "dose"
    duration_text: str | None  # "for 7 days", "x5d"
    duration_days: float | None
    one_time: bool = False  # "once", "stat", "single dose", "now"

    @property
    def dosage_text(self) -> str | None:
        """What ``prescribe_medication.dosage`` takes: the strength through the dose when both
        are written together ("500 mg tablets, 2 tabs" is too long: the dose), else the dose,
        else the strength."""
        if self.dose and self.strength and self.strength.span[0] < self.dose.span[0] \
                and self.dose.span[1] - self.strength.span[0] <= 24:
            return self.text[self.strength.span[0]:self.dose.span[1]]
        chosen = self.dose or self.strength
        return chosen.text if chosen else None

    def mg_per_dose(self) -> float | None:
        """Milligrams per administration: the dose's mass, or a count of a form times its
        strength ("2 tablets" of "500 mg" -> 1000), or a volume times a concentration. None
        when code cannot tell."""
        dose, strength = self.dose, self.strength
        if dose is None:
            return None
        if dose.mg is not None:
            return dose.mg
        if strength is None or strength.mg is None:
            return None
        if dose.unit in w.FORMS and strength.per_ml is None:
            return dose.value * strength.mg
        if dose.unit in w.VOLUME_ML and strength.per_ml:
            return dose.value * w.VOLUME_ML[dose.unit] * strength.mg / strength.per_ml
        return None

    def mg_per_day(self) -> float | None:
        """Milligrams per day at the most the order allows: per dose times ``per_day``, capped
        by an as-needed maximum when that is lower. None when code cannot tell."""
        per_dose = self.mg_per_dose()
        if per_dose is None:
            return None
        daily = per_dose * self.per_day if self.per_day is not None else None
        cap = self._max_mg(per_dose)
        if daily is None:
            return cap
        return min(daily, cap) if cap is not None else daily

    def _max_mg(self, per_dose: float) -> float | None:
        most = self.max_per_day
        if most is None:
            return None
        if most.mg is not None:
            return most.mg
        if most.unit in (None, "dose"):  # administrations
            return most.value * per_dose
        if most.unit in w.FORMS and self.strength is not None and self.strength.mg is not None:
            return most.value * self.strength.mg  # tablets a day of a known strength
        if self.dose is not None and most.unit == self.dose.unit and self.dose.value:
            return most.value / self.dose.value * per_dose
        return None


# Digits that are never a dose: patient and record IDs, UUIDs, MRNs, dates, times, ages.
_NOT_DOSES = re.compile(
    r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}"
    r"|(?<![\w.\-])[A-Za-z]{2,10}-\d{3,}(?:[.\-][A-Za-z0-9]+)*"
    r"|\b(?:MRN|ID)\b\.?:?\s*#?\s*\d+|#\s?\d{4,}"
    r"|\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    r"|\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)(?!\w)|\b\d{1,2}:\d{2}\b"
    r"|\b\d+[- ](?:year|month|week|day)s?[- ]old\b|\baged?\s+\d+\b",
    re.IGNORECASE)


def _mask(text: str, pattern: re.Pattern) -> str:
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _amount(text: str, m: re.Match) -> Amount | None:
    try:
        if m.group("low") is not None:
            unit, per, low, value = m.group("unit"), m.group("per"), _number(m.group("low")), _number(m.group("high"))
            parts: tuple[float, ...] = ()
        else:
            unit, per, low = m.group("unit2"), m.group("per2"), None
            parts = tuple(_number(p) for p in re.split(r"\s*/\s*", m.group("value")))
            value = max(parts)
            parts = parts if len(parts) > 1 else ()
    except (ValueError, OverflowError):
        return None
    normal = w.UNITS.get(unit.lower())
    per_ml = None
    if per:
        tail = per.replace(" ", "").lower()
        if "kg" in tail or "m2" in tail:
            normal = f"{normal}/kg" if "kg" in tail else f"{normal}/m2"
        else:
            volume = re.fullmatch(r"/(\d+(?:\.\d+)?)?(ml|mls|cc|l)", tail)
            if volume and normal in w.MASS:
                per_ml = float(volume.group(1) or 1) * (1000.0 if volume.group(2) == "l" else 1.0)
            elif normal in w.MASS:
                normal = f"{normal}/{tail.lstrip('/')}"
    return Amount(m.group(0), value, low, normal, parts, per_ml, (m.start(), m.end()))


def _first(pattern: re.Pattern, text: str, start: int = 0) -> re.Match | None:
    """The first match at or after ``start``, else the first anywhere."""
    found = list(pattern.finditer(text))
    after = [m for m in found if m.start() >= start]
    return (after or found or [None])[0]


def _frequency(text: str, start: int) -> tuple[str | None, float | None, tuple[int, int] | None]:
    best = None
    for pattern, per_day in w.FREQUENCY_RES:
        for m in pattern.finditer(text):
            key = (m.start() < start, m.start(), -(m.end() - m.start()))
            if best is None or key < best[0]:
                best = (key, m, per_day)
    if best is None:
        return None, None, None
    _key, m, per_day = best
    value = per_day if per_day is not None else w.times_per_day(m)
    return m.group(0), value, m.span()


def parse_order(text: str, drugs) -> Order:
    """Read one order from ``text`` (a whole message or a chart row's "name dosage frequency").
    ``drugs`` is a ``appliance.medication.names.DrugRecogniser``: the first drug mention is the
    order's drug. Never raises on any text: what it cannot read stays None."""
    text = text if isinstance(text, str) else ""
    try:
        return _parse(text, drugs)
    except Exception:  # noqa: BLE001 - the invariant: any text gives an Order, never an exception
        return Order(text, None, None, None, None, None, None, None, None, False, None, None, None)


def _parse(text: str, drugs) -> Order:
    head = text[:MAX_TEXT]
    mentions = drugs.mentions(head) if drugs is not None else []
    mention = mentions[0] if mentions else None
    start = mention.end if mention else 0
    masked = _mask(head, _NOT_DOSES)
    if mention:  # the drug's own name may hold digits ("B12"): not a dose
        masked = masked[:mention.start] + " " * (mention.end - mention.start) + masked[mention.end:]

    most = w.MAX_RE.search(masked)
    max_amount = None
    if most:
        unit = most.group("unit")
        value = _number(most.group("value"))
        max_amount = Amount(head[most.start():most.end()], value, None,
                            w.UNITS.get(unit.lower()) if unit else None, span=most.span())
        masked = masked[:most.start()] + " " * (most.end() - most.start()) + masked[most.end():]
    duration = w.DURATION_RE.search(masked)
    duration_days = None
    if duration:
        duration_days = float(duration.group("n")) * w.DURATION_DAYS.get(duration.group("unit").lower(), 1)
        masked = masked[:duration.start()] + " " * (duration.end() - duration.start()) + masked[duration.end():]

    amounts = [a for a in (_amount(head, m) for m in w.AMOUNT_RE.finditer(masked)) if a is not None]
    amounts.sort(key=lambda a: (a.span[0] < start, a.span[0]))  # after the drug first
    forms = [a for a in amounts if a.unit in w.FORMS or a.unit in w.VOLUME_ML or a.unit == "dose"]
    others = [a for a in amounts if a not in forms]
    if forms:
        dose = forms[0]
        strength = next((a for a in others if a.span[0] < dose.span[0]), None) or (others[0] if others else None)
    else:
        dose, strength = (others[0] if others else None), None
    for a in amounts:  # a concentration ("250 mg/5 mL") is the strength; the volume given is the dose
        if a.per_ml is not None and a is not strength:
            strength = a
            dose = next((f for f in forms if f.unit in w.VOLUME_ML), None)
            break
    for a in (dose, strength):
        if a is not None:
            masked = masked[:a.span[0]] + " " * (a.span[1] - a.span[0]) + masked[a.span[1]:]

    route_match = _first(w.ROUTE_RE, masked, start)
    route = None
    if route_match:
        index = next(int(k[1:]) for k, v in route_match.groupdict().items() if v)
        route = w.ROUTES[index][1]
    frequency_text, per_day, _span = _frequency(masked, start)
    one_time = bool(w.ONE_TIME_RE.search(masked))
    if frequency_text is None and one_time:
        per_day = 1.0
    return Order(
        text=text,
        drug_text=mention.text if mention else None,
        generic=mention.generic if mention else None,
        strength=strength,
        dose=dose,
        route=route,
        route_text=route_match.group(0) if route_match else None,
        frequency_text=frequency_text,
        per_day=per_day,
        as_needed=bool(w.AS_NEEDED_RE.search(masked)),
        max_per_day=max_amount,
        duration_text=duration.group(0) if duration else None,
        duration_days=duration_days,
        one_time=one_time and frequency_text is None,
    )


__all__ = ["MASS_MG", "Amount", "Order", "parse_order"]
