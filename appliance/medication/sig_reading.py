"""The parts of a sig ``orders.parse_order`` reads beside the dose and frequency: the quantity
to dispense, the refills, a dose written without a unit, and what an as-needed order is for.

Invariants:
- Functions over the order's masked text (``orders``: IDs, dates and what was already read are
  blanked); each returns spans into it, so what it reads is the clinician's own words.
- A quantity and refills are read before any dose, and blanked, so "disp 30 tabs" is never
  a dose of 30 tablets.
- A bare number is a dose only right after the drug's name ("augmentin 875 bid", "metformin to
  1000"), never before a duration, count or time word; its unit is the drug's usual one
  (``order_words.implied_unit``) and is marked implied, for the clinician to see and confirm.
"""

from __future__ import annotations

import math
import re

from appliance.medication import order_words as w


def _number(text: str) -> float | None:
    value = float(text.replace(",", ""))
    return value if math.isfinite(value) else None


def quantity(masked: str) -> tuple[tuple[int, int], float, str | None] | None:
    """(span, number, unit or None) of a quantity to dispense ("#30", "disp 60 tabs")."""
    found = w.QUANTITY_RE.search(masked)
    if found is None:
        return None
    value = _number(found.group("n"))
    if value is None:
        return None
    unit = w.UNITS.get(found.group("unit").lower()) if found.group("unit") else None
    return found.span(), value, unit


def refills(masked: str) -> tuple[int, tuple[int, int]] | None:
    """(refills, span): "2 refills", "RF x3", "refills: 5", "no refills" (0)."""
    found = w.REFILLS_RE.search(masked)
    if found is None:
        return None
    word = (found.group("n") or found.group("n2")).lower()
    return (int(word) if word.isdigit() else w.REFILL_COUNTS[word]), found.span()


def bare_dose(masked: str, after: int, generic: str | None) -> tuple[tuple[int, int], float, str] | None:
    """(span, number, implied unit) of a number with no unit right after the drug (which ends
    at ``after``); None when none is written there."""
    found = w.BARE_DOSE_RE.match(masked, after)
    if found is None:
        return None
    value = _number(found.group("n"))
    if value is None or value <= 0:
        return None
    return found.span("n"), value, w.implied_unit(generic)


def indication(head: str, masked: str) -> str | None:
    """What an as-needed order is for ("prn pain, max 4 g/day" -> "pain"), as written in
    ``head``; None when the as-needed words are followed by no reason."""
    found = w.INDICATION_RE.search(masked)
    if found is None:
        return None
    kept = []
    for m in re.finditer(r"\S+", found.group("words")):
        if m.group(0).lower() in w.INDICATION_STOP:
            break
        kept.append(m)
    if not kept:
        return None
    start = found.start("words")
    return head[start + kept[0].start():start + kept[-1].end()]


__all__ = ["bare_dose", "indication", "quantity", "refills"]
