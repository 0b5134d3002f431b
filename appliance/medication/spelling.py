"""A misspelt drug name's likely meaning ("amoxicilin" -> amoxicillin), for a question to the
clinician ("did you mean amoxicillin?"), never for an order.

Invariants:
- Only a word no recogniser source knows is looked at, and only a single-word name of at least
  five letters is suggested (short words match too much); the answer is the known name's
  generic, or None when no name is close enough (``CUTOFF``, difflib's ratio).
- Candidates share the word's first letter and are within two letters of its length, so one
  look-up compares a few hundred names, not the whole dictionary.
- Pure and offline; the text is patient data and is never logged.
"""

from __future__ import annotations

import difflib
import functools
import re

from appliance.medication.names import library_lexicon, overlay

CUTOFF = 0.82
MIN_LETTERS = 5
_WORD = re.compile(r"[a-z]+(?:-[a-z]+)?")


@functools.cache
def _by_letter() -> dict[str, tuple[str, ...]]:
    names: dict[str, list[str]] = {}
    for key in {**library_lexicon(), **overlay()}:
        if _WORD.fullmatch(key) and len(key) >= MIN_LETTERS:
            names.setdefault(key[0], []).append(key)
    return {letter: tuple(keys) for letter, keys in names.items()}


def suggestion(word: str, drugs) -> str | None:
    """The generic of the known drug name closest to ``word`` (a name ``drugs``, the
    recogniser, does not know), or None."""
    key = (word or "").strip().lower()
    if not _WORD.fullmatch(key) or len(key) < MIN_LETTERS or drugs.generic(key):
        return None
    pool = [k for k in _by_letter().get(key[0], ()) if abs(len(k) - len(key)) <= 2]
    close = difflib.get_close_matches(key, pool, n=1, cutoff=CUTOFF)
    return drugs.generic(close[0]) if close else None


__all__ = ["CUTOFF", "suggestion"]
