"""The local drug data's names as the knowledge reader uses them (docs/design.md §11): the
matching keys of every name the knowledge server holds, and the typo check against them.

Invariants:
- ``local_drug_data`` is the one I/O: it asks a tool box once for the knowledge server's names
  and drug count and keeps them for that tool box's life; a server that does not answer turns
  the typo check off and changes nothing else.
- ``typos`` reads a word as a drug only when the recogniser does not know it, it is not a word
  of the request's own vocabulary, and it is close to a name of the local data (``difflib``
  ratio >= ``TYPO_CUTOFF``).
"""

from __future__ import annotations

import difflib
import logging
import re
import weakref

from appliance.agent import knowledge_words as kw
from appliance.medication.names import DrugRecogniser, key_of

log = logging.getLogger(__name__)
TYPO_CUTOFF = 0.84


def drug_vocabulary_keys(names) -> list[str]:
    """The matching keys of the local drug data's names, for the typo check."""
    return sorted({key_of(n) for n in names if n and len(key_of(n)) >= 4})


_DRUG_DATA: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def local_drug_data(tools) -> tuple[list[str], int | None]:
    """(matching keys of the knowledge server's drug names, how many drugs it holds; None when
    it does not say), asked once per tool box. A server that does not answer gives ([], None):
    the typo check is then off, nothing else changes."""
    try:
        return _DRUG_DATA[tools]
    except (KeyError, TypeError):
        pass
    names, count = [], None
    try:
        if hasattr(tools, "call_server"):
            outcome = tools.call_server("knowledge", "drug_vocabulary", {}, 20.0)
            if outcome.ok and isinstance(outcome.result, dict):
                names, count = list(outcome.result.get("names") or []), outcome.result.get("drugs")
        else:
            names = list(tools.drug_names())
    except Exception as exc:  # noqa: BLE001 - a missing hint source must not stop the turn
        log.warning("no drug vocabulary for the typo check (%s)", type(exc).__name__)
    data = (drug_vocabulary_keys(names), count if isinstance(count, int) else None)
    try:
        _DRUG_DATA[tools] = data
    except TypeError:
        pass
    return data


def typos(text: str, drugs: DrugRecogniser, vocabulary: list[str]) -> list[tuple[str, str, str]]:
    """(word as written, known name, generic) for words that are not drugs but close to a name
    of the local drug data."""
    if not vocabulary:
        return []
    taken = [(m.start, m.end) for m in drugs.mentions(text)]
    out = []
    for m in re.finditer(r"[A-Za-z][A-Za-z\-]{4,}", text):
        word = m.group(0).lower()
        if word in kw.NOT_TYPOS or word in kw.FILLER or any(s <= m.start() < e for s, e in taken):
            continue
        close = difflib.get_close_matches(word, vocabulary, n=1, cutoff=TYPO_CUTOFF)
        generic = drugs.generic(close[0]) if close else None
        if close and generic and close[0] != word:
            out.append((m.group(0), close[0], generic))
    return out


__all__ = ["TYPO_CUTOFF", "drug_vocabulary_keys", "local_drug_data", "typos"]
