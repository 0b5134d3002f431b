"""A clinician's medication order, parsed by code: drug, strength, dose, unit, route, frequency,
as-needed with its maximum, and duration ("Prescribe amoxicillin 500 mg PO three times daily",
"1 tab PO BID", "2 puffs q4-6h prn max 8/day", "methotrexate 15 mg once weekly"), the way a CPOE
system reads a sig. The vocabulary is in ``order_words``.

Invariants:
- ``parse_order`` never raises, on any text; what it cannot read stays None (never a guess).
  ``Order.text`` is the text given, unchanged; only its first ``MAX_TEXT`` characters are read.
- Every ``*_text`` field and every ``Amount.text`` is an exact substring of ``Order.text``, so an
  argument filled from it is the clinician's own words; ``Amount.span`` says where.
- Patient IDs ("pat-006"), dates, times and ages are masked before amounts and frequencies are
  read: their digits are never a dose. Neither are laboratory values ("Cr 1.2 mg/dL"), a
  diluent's volume ("in 250 mL NS"), the drug's own name ("vitamin B12"), nor the maximum and
  the duration once read.
- The drug is the first mention the drug recogniser finds (brands resolve to generics); the
  dose, route and frequency are the first after it (else the first anywhere).
- Only a mass is a dose in milligrams; a count of a form is milligrams only through a written
  strength, a volume only through a written concentration; per-weight, per-time and
  multi-ingredient amounts are never milligrams (``Amount.mg`` is None).
- A frequency range ("q4-6h") counts at the most it allows (every 4 hours: 6 a day); a written
  maximum per day bounds the daily amount when it is lower.
- No model, no network, no logging: the text is patient data.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from appliance.medication import order_words as w
from appliance.medication import sig_reading

# Units as the parser writes them (normalised): mass units convert through ``MASS_MG``.
MASS_MG = {"g": 1000.0, "mg": 1.0, "mcg": 0.001, "ng": 0.000001}
MAX_TEXT = 10_000  # characters read; a longer message is read up to here
_MASK = "\x00"  # what masked text becomes: neither a word, a digit nor a space


@dataclass(frozen=True)
class Amount:
    """A quantity as written and as read: "500 mg", "1-2 tablets", "2 puffs", "250 mg/5 mL"."""

    text: str  # exactly as written in the order (a substring of ``Order.text``)
    value: float  # the upper bound of a range ("1-2 tablets": 2); the largest part of a combination
    low: float | None  # the lower bound of a range, else None
    unit: str | None  # normalised (``order_words.UNITS``); per-weight and per-time units as written,
    # normalised: "mg/kg", "mg/kg/day", "mcg/h", "mg/24h", "mg/day"; None: no unit (a count)
    parts: tuple[float, ...] = ()  # a combination strength "50/1000 mg": one value per ingredient
    per_ml: float | None = None  # a concentration "250 mg/5 mL": the volume the value is in
    span: tuple[int, int] = (0, 0)  # where ``text`` stands in ``Order.text``
    implied: bool = False  # a bare number after the drug ("augmentin 875"): ``unit`` is the drug's usual one

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
    frequency_text: str | None  # as written: "three times daily", "q8h", "BID", "once weekly", "at night", "stat"
    per_day: float | None  # administrations per day, the most the order allows (q4-6h -> 6; weekly -> 1/7)
    as_needed: bool
    max_per_day: Amount | None  # "max 8/day" -> 8, unit None; "max 3 g/day" -> 3 g; "4 doses" -> unit "dose"
    duration_text: str | None  # "for 7 days", "x5d", "5/7"
    duration_days: float | None
    one_time: bool = False  # "once", "stat", "single dose", "now", "x1": per_day is 1
    as_needed_for: str | None = None  # what an as-needed order is for, as written: "pain", "severe nausea"
    quantity: Amount | None = None  # to dispense: "#30", "disp 60 tabs" (the number and its form)
    refills: int | None = None  # "2 refills", "RF x3", "no refills" -> 0

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
        """Milligrams per day at the most the order allows: per dose times ``per_day``, bounded
        by a written maximum per day when that is lower. A maximum in milligrams bounds the day
        even when the dose or the frequency is unknown; None when code has no bound at all."""
        per_dose = self.mg_per_dose()
        daily = per_dose * self.per_day if per_dose is not None and self.per_day is not None else None
        cap = self._max_mg(per_dose)
        bounds = [b for b in (daily, cap) if b is not None]
        return min(bounds) if bounds else None

    def _max_mg(self, per_dose: float | None) -> float | None:
        most = self.max_per_day
        if most is None:
            return None
        if most.mg is not None:
            return most.mg
        if most.unit in w.FORMS and self.strength is not None and self.strength.mg is not None \
                and self.strength.per_ml is None:
            return most.value * self.strength.mg  # tablets a day of a known strength
        if per_dose is None:
            return None
        if most.unit in (None, "dose"):  # administrations
            return most.value * per_dose
        if self.dose is not None and most.unit == self.dose.unit and self.dose.value:
            return most.value / self.dose.value * per_dose
        return None


# Digits that are never a dose: patient and record IDs, UUIDs, MRNs, dates, times, ages.
_NOT_DOSES = re.compile(
    r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}"
    r"|(?<![\w.\-])[A-Za-z]{2,10}-\d{3,}(?:[.\-][A-Za-z0-9]+)*"
    r"|\b(?:MRN|ID)\b\.?:?\s*#?\s*\d+|#\s?\d{4,}"
    r"|\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d{1,2}\.\d{1,2}\.\d{4}\b"
    r"|\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)(?!\w)|\b\d{1,2}:\d{2}\b|\b\d{1,2}h\d{2}\b|\b\d{4}\s*hrs\b"
    r"|\b\d+[- ](?:year|month|week|day)s?[- ]old\b|\baged?\s+\d+\b|\b\d+\s*y/?o\b"
    # laboratory values: "Cr 1.2 mg/dL", "K 3.2 mEq/L", "eGFR 45 mL/min/1.73 m2"
    r"|(?<![\w.])\d[\d.,]*\s*(?:mg|g|mcg|µg|ug|ng|mmol|mEq|units?|IU|mL|pg)\s*/\s*(?:dL|L|min)\b"
    r"(?:\s*/\s*1\.73\s*m2)?",
    re.IGNORECASE)
_DILUENT = re.compile(r"\b(?:in|into|diluted with|mixed with|made up to)\s*$", re.IGNORECASE)
_SEPARATOR = re.compile(r"\s*(/|-|–|\bto\b)\s*", re.IGNORECASE)


def _blank(masked: str, span: tuple[int, int]) -> str:
    return masked[:span[0]] + _MASK * (span[1] - span[0]) + masked[span[1]:]


def _number(text: str) -> float | None:
    value = float(text.replace(",", ""))
    return value if math.isfinite(value) else None


def _tail_unit(normal: str, tail: str, values: tuple[float, ...]) -> tuple[str, float | None, tuple[float, ...]]:
    """(unit, per_ml, parts) for an amount of ``normal`` units followed by ``tail``
    ("/5 mL", "/kg/day", "/hr", "/actuation", "/2 mg")."""
    per_ml, parts, unit = None, (), normal
    for i, segment in enumerate(s.strip() for s in tail.split("/")[1:]):
        found = re.fullmatch(rf"({w.NUMBER})?\s*(.+)", segment)
        count = _number(found.group(1)) if found.group(1) else None
        word = re.sub(r"\s+", " ", found.group(2).lower())
        other = w.UNITS.get(word)
        time = w.TIME_TAILS.get(word)
        if re.fullmatch(r"24\s*h\w*", word) or (count == 24 and time == "h"):
            unit += "/24h"
        elif time:
            unit += f"/{time}"
        elif word in ("kg", "m2"):
            unit += f"/{word}"
        elif other == "dose" or (i == 0 and other in w.FORMS):
            pass  # "mg/kg/dose" is per dose; "90 mcg/actuation" is a strength per unit of form
        elif i == 0 and other in w.VOLUME_ML and normal in w.CONCENTRATED:
            per_ml = (count if count is not None else 1.0) * w.VOLUME_ML[other]
        elif i == 0 and other == normal and count is not None and len(values) == 1:
            parts = (values[0], count)  # "8 mg/2 mg": two ingredients
        else:
            unit += f"/{other or word.replace(' ', '')}"
    return unit, per_ml, parts


def _amount(head: str, m: re.Match) -> Amount | None:
    """One amount from an ``order_words.AMOUNT_RE`` match, or None when it is not a number
    code can use (too large, mixed separators)."""
    normal = w.UNITS.get(re.sub(r"\s+", " ", m.group("unit").lower()))
    if normal is None:
        return None
    pieces = _SEPARATOR.split(m.group("value"))
    values = tuple(_number(p) for p in pieces[::2])
    separators = {s.lower() for s in pieces[1::2]}
    if any(v is None for v in values) or len(separators) > 1 or len(values) > 4:
        return None
    low, parts = None, ()
    value = values[0]
    if separators and separators != {"/"}:  # a range
        if len(values) != 2:
            return None
        low, value = values
        if low > value:  # "875-125 mg": a combination, not a range
            low, parts, value = None, values, max(values)
    elif separators:
        if normal in w.FORMS and len(values) == 2 and values[1]:
            value = values[0] / values[1] + (_number(m.group("whole")) if m.group("whole") else 0.0)  # "1 1/2 tabs"
        else:
            parts, value = values, max(values)
    unit, per_ml, tail_parts = _tail_unit(normal, m.group("per") or "", values)
    if tail_parts:
        parts, value = tail_parts, max(tail_parts)
    return Amount(head[m.start():m.end()], value, low, unit, parts, per_ml, (m.start(), m.end()))


def _amounts(head: str, masked: str) -> list[Amount]:
    """Every amount in the text, but a diluent's volume ("1 g in 250 mL NS"): that is no dose."""
    found = [a for a in (_amount(head, m) for m in w.AMOUNT_RE.finditer(masked)) if a is not None
             and not (a.unit in w.VOLUME_ML and _DILUENT.search(masked, max(0, a.span[0] - 16), a.span[0]))]
    taken = [a.span for a in found]
    for m in w.WORD_AMOUNT_RE.finditer(masked):
        if not any(s < m.end() and m.start() < e for s, e in taken):
            value = w.WORD_NUMBERS[re.sub(r"\s+", " ", m.group("value").lower())]
            found.append(Amount(head[m.start():m.end()], float(value), None, w.UNITS[m.group("unit").lower()],
                                span=m.span()))
    return found


def _strength_and_dose(amounts: list[Amount], start: int) -> tuple[Amount | None, Amount | None]:
    """The strength (per unit of form, or a concentration) and the dose (per administration),
    preferring amounts after the drug: a count of a form or a volume is the dose and a mass
    beside it the strength; a mass alone is the dose."""
    amounts = sorted(amounts, key=lambda a: (a.span[0] < start, a.span[0]))
    concentration = next((a for a in amounts if a.per_ml), None)
    if concentration is not None:
        rest = [a for a in amounts if a is not concentration]
        dose = next((a for a in rest if a.unit in w.VOLUME_ML), None) \
            or next((a for a in rest if a.unit in w.FORMS or a.unit == concentration.unit), None)
        return concentration, dose
    forms = [a for a in amounts if a.unit in w.FORMS or a.unit in w.VOLUME_ML or a.unit == "dose"]
    others = [a for a in amounts if all(a is not f for f in forms)]
    if not forms:
        return None, (others[0] if others else None)
    dose = forms[0]
    if dose.unit not in w.FORMS:
        return None, dose
    before = [a for a in others if a.span[0] < dose.span[0] and (a.span[0] < start) == (dose.span[0] < start)]
    strength = before[-1] if before else (others[0] if others else None)
    return strength, dose


def _earliest(matches: list[re.Match], start: int) -> re.Match | None:
    """The first match at or after ``start`` (the drug), else the first anywhere; the longest
    of those that start together."""
    return min(matches, key=lambda m: (m.start() < start, m.start(), -(m.end() - m.start())), default=None)


def _route(masked: str, start: int, all_caps: bool) -> tuple[str | None, re.Match | None]:
    matches = [m for m in w.ROUTE_RE.finditer(masked) if not (all_caps and m.group(0) == "IN")]
    m = _earliest(matches, start)
    if m is None:
        return None, None
    index = next(int(k[1:]) for k, v in m.groupdict().items() if v is not None)
    return w.ROUTES[index][1], m


def _frequency(masked: str, start: int) -> tuple[re.Match | None, float | None]:
    found = [(m, per_day) for pattern, per_day in w.FREQUENCY_RES for m in pattern.finditer(masked)]
    best = _earliest([m for m, _ in found], start)
    if best is None:
        return None, None
    per_day = next(p for m, p in found if m is best)
    return best, (per_day if per_day is not None else w.times_per_day(best))


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
    masked = _NOT_DOSES.sub(lambda m: _MASK * len(m.group(0)), head)
    if mention:  # the drug's own name may hold digits ("B12"), or name its strength ("DS", "#3"): not a dose
        start = sig_reading.strength_words(masked, mention.end) or mention.end
        masked = _blank(masked, (mention.start, start))

    most = _earliest(list(w.MAX_RE.finditer(masked)), start)
    max_amount = None
    if most:
        unit, value = most.group("unit"), _number(most.group("value"))
        unit = w.UNITS.get(re.sub(r"\s+", " ", unit.lower())) if unit else None
        if unit and most.group("perkg"):
            unit += "/kg"
        if value is not None:
            max_amount = Amount(head[most.start():most.end()], value, None, unit, span=most.span())
        masked = _blank(masked, most.span())
    duration = _earliest(list(w.DURATION_RE.finditer(masked)), start)
    duration_days = None
    if duration:
        if duration.group("n"):
            days = float(duration.group("n")) * w.DURATION_DAYS[duration.group("unit").lower()]
        elif duration.group("nw"):
            days = float(w.DURATION_WORDS[duration.group("nw").lower()]) \
                * w.DURATION_DAYS[duration.group("unitw").lower()]
        else:
            days = float(duration.group("n2")) * w.DURATION_DAYS[duration.group("per")]
        duration_days = days if math.isfinite(days) else None
        masked = _blank(masked, duration.span())
    quantity = refills = None
    found = sig_reading.quantity(masked)
    if found is not None:
        span, value, unit = found
        quantity = Amount(head[span[0]:span[1]], value, None, unit, span=span)
        masked = _blank(masked, span)
    found = sig_reading.refills(masked)
    if found is not None:
        refills, span = found
        masked = _blank(masked, span)

    strength, dose = _strength_and_dose(_amounts(head, masked), start)
    if dose is None and strength is None and mention is not None:
        bare = sig_reading.bare_dose(masked, start, mention.generic)
        if bare is not None:
            span, value, unit = bare
            dose = Amount(head[span[0]:span[1]], value, None, unit, span=span, implied=True)
    bare_parts = sig_reading.bare_parts(masked, start, mention.generic, dose and (dose.unit, dose.span)) \
        if strength is None and mention is not None else None
    if bare_parts is not None:  # "Percocet 5/325": mg per unit, implied; alone it is the dose, as "5/325 mg" is
        span, values = bare_parts
        parts = Amount(head[span[0]:span[1]], max(values), None, "mg", parts=values, span=span, implied=True)
        dose, strength = (parts, None) if dose is None else (dose, parts)
    for amount in (dose, strength):
        if amount is not None:
            masked = _blank(masked, amount.span)

    route, route_match = _route(masked, start, not any(c.islower() for c in head))
    route_text = head[route_match.start():route_match.end()] if route_match else None
    if dose is not None and dose.unit == "drop":  # "1 drop OD": the right eye, not once daily
        for m in w.EYE_OD_RE.finditer(masked):
            if route is None:
                route, route_text = "ophthalmic", head[m.start():m.end()]
            masked = _blank(masked, m.span())
    frequency, per_day = _frequency(masked, start)
    frequency_text = head[frequency.start():frequency.end()] if frequency else None
    one_time = bool(frequency_text) and re.sub(r"\s+", " ", frequency_text.lower()) in w.ONE_TIME_WORDS
    if frequency is None:  # "stat", "now", "x1", "single dose" after the drug: one administration
        single = _earliest([m for m in w.ONE_TIME_RE.finditer(masked) if m.start() >= start], start)
        if single is not None:
            frequency_text, per_day, one_time = head[single.start():single.end()], 1.0, True
    return Order(
        text=text,
        drug_text=head[mention.start:start] if mention else None,
        generic=mention.generic if mention else None,
        strength=strength,
        dose=dose,
        route=route,
        route_text=route_text,
        frequency_text=frequency_text,
        per_day=per_day,
        as_needed=bool(w.AS_NEEDED_RE.search(masked)),
        as_needed_for=sig_reading.indication(head, masked),
        quantity=quantity,
        refills=refills,
        max_per_day=max_amount,
        duration_text=head[duration.start():duration.end()] if duration else None,
        duration_days=duration_days,
        one_time=one_time,
    )


__all__ = ["MASS_MG", "MAX_TEXT", "Amount", "Order", "parse_order"]
