"""What the curated dose tables share (``data/dose_limits.tsv``, ``pediatric_limits.tsv``,
``course_limits.tsv``): the routes a row may name and the error a malformed row raises.

Invariant: imports nothing from the gate's other modules, so every table reader can use it.
"""

from __future__ import annotations

from appliance.medication import order_words

ROUTES = tuple(dict.fromkeys(name for _, name in order_words.ROUTES))  # as the parser writes ``Order.route``
# Local routes: an "any" row does not cover them (a gel's grams are not a tablet's milligrams).
LOCAL_ROUTES = frozenset({"topical", "transdermal", "inhaled", "intranasal", "vaginal", "ophthalmic", "otic"})


class DoseTableError(ValueError):
    """A curated dose table has a malformed row."""


__all__ = ["LOCAL_ROUTES", "ROUTES", "DoseTableError"]
