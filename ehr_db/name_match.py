"""Closest patient names for a search with no exact match ("emily jonson" -> Emily Johnson),
and the one sentence that offers them, which the front ends read back.

Invariants:
- Closeness is ``difflib``'s ratio over folded names (accents, case and punctuation ignored),
  per word in any order as well as whole, so a typo, a missing letter or swapped given and
  family names still find the person; only names at least ``CUTOFF`` close are offered, at most
  ``LIMIT`` of them, closest first (ties by name, birth date, ID).
- The offer is code's fixed sentence (``closest_sentence``); ``closest_in`` reads back exactly
  the patients it named, or () for any other text, so nothing else is taken for a candidate.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

CUTOFF = 0.75
LIMIT = 5
LEAD = "Closest names in the record: "
_ENTRY_RE = re.compile(r"(?P<name>[^;()]+?) \(born (?P<born>[^,()]+), ID (?P<id>[A-Za-z0-9.\-]{1,64})\)")


def _score(query: str, key: str) -> float:
    """How close the folded ``query`` is to a folded name: the whole names, or each query word
    against its best name word (so word order does not matter)."""
    whole = SequenceMatcher(None, query, key).ratio()
    words, names = query.split(), key.split()
    if not words or not names:
        return whole
    per_word = sum(max(SequenceMatcher(None, w, n).ratio() for n in names) for w in words) / len(words)
    return max(whole, per_word if len(words) <= len(names) else per_word * len(names) / len(words))


def closest(query: str, rows: list[dict], key: str = "name_key") -> list[dict]:
    """The rows whose folded name (``row[key]``) is close to the folded ``query``."""
    scored = [(_score(query, str(r[key]).strip()), r) for r in rows]
    scored = [(s, r) for s, r in scored if s >= CUTOFF]
    scored.sort(key=lambda sr: (-sr[0], str(sr[1].get("family", "")), str(sr[1].get("given", "")),
                                str(sr[1].get("birth_date") or ""), str(sr[1].get("id", ""))))
    return [r for _, r in scored[:LIMIT]]


def closest_sentence(matches: list[dict]) -> str:
    """The offer: ``Closest names in the record: Emily Johnson (born 1984-06-02, ID pat-006).``"""
    if not matches:
        return ""
    return LEAD + "; ".join(
        f"{m['name']} (born {m.get('birth_date') or 'unknown'}, ID {m['patient_id']})" for m in matches) + "."


def closest_in(text: str) -> tuple[dict, ...]:
    """The patients a ``closest_sentence`` inside ``text`` offers, or ()."""
    at = (text or "").find(LEAD)
    if at < 0:
        return ()
    body = text[at + len(LEAD):].split("\n", 1)[0].rstrip(".")
    found = []
    for part in body.split("; "):
        m = _ENTRY_RE.fullmatch(part.strip())
        if m is None:
            return ()
        born = None if m["born"] == "unknown" else m["born"]
        found.append({"patient_id": m["id"], "name": m["name"], "birth_date": born})
    return tuple(found)
