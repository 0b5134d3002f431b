"""The parts of a sig ``orders.parse_order`` reads beside the dose and frequency: the quantity
to dispense, the refills, a dose written without a unit (and a combination's strength, "Percocet
5/325"), and what an as-needed order is for.

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


# Words right after a product's name that name its strength: "Bactrim DS", "Tylenol #3".
_STRENGTH_WORDS = re.compile(r"\s*(?:DS|SS|double[ -]strength|single[ -]strength|#\s?[1-4]|No\.?\s?[1-4])(?![\w/.])",
                             re.IGNORECASE)


def strength_words(masked: str, after: int) -> int | None:
    """Where words naming the product's strength end, when they follow the drug's name (which
    ends at ``after``): they belong to the name ("Bactrim DS", "Tylenol #3"), never a quantity."""
    found = _STRENGTH_WORDS.match(masked, after)
    return found.end() if found else None


# A combination's strength with no unit right after its name: "Percocet 5/325", "Janumet 50/1000".
_BARE_PARTS = re.compile(
    rf"\s*(?P<n>\d+(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)+)(?![\w.%/\-])(?!\s*(?:{w.UNIT_WORDS})(?!\w))", re.IGNORECASE)
_BARE_PARTS_FORMS = frozenset({"tablet", "capsule"})  # mg per unit; an inhaler's "250/50" is in mcg


def bare_parts(masked: str, after: int, generic: str | None, dose: tuple[str | None, tuple[int, int]] | None
               ) -> tuple[tuple[int, int], tuple[float, ...]] | None:
    """(span, one number per ingredient) of a combination's strength written with no unit right
    after the drug ("Percocet 5/325 1 tablet"), in mg by convention; None unless ``generic`` has
    that many ingredients and the dose read (``dose``: unit and span) is none, or a count of
    tablets or capsules apart from it."""
    if "-" not in (generic or "") or (dose is not None and dose[0] not in _BARE_PARTS_FORMS):
        return None
    found = _BARE_PARTS.match(masked, after)
    if found is None:
        return None
    values = tuple(float(v) for v in re.split(r"\s*/\s*", found.group("n")))
    span = found.span("n")
    if len(values) != len(generic.split("-")) or not all(0 < v < 100_000 for v in values) or \
            (dose is not None and dose[1][0] < span[1] and span[0] < dose[1][1]):
        return None
    return span, values


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
