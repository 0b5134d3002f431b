"""The agent's one tokeniser: lower-case words and numbers.

Invariants: "500mg" and "500 mg" both give ["500", "mg"]; a decimal stays one number
("2.5"); punctuation, apostrophes and dashes split words ("pat-002" gives ["pat", "002"]).
Every comparison of words in the agent (a write's values against the clinician's words, a
copied run, an answer's overlap with its findings, a name picked from a list) uses it.
``name_words`` gives the words as written that may be a drug's name, for the spelling check.
"""

from __future__ import annotations

import re

_WORD_RE = re.compile(r"[a-z]+|\d+(?:\.\d+)?")


_NAME_WORD_RE = re.compile(r"[A-Za-z][A-Za-z\-]*")


def words(text: str) -> list[str]:
    """Lower-case words and numbers of ``text``, in order."""
    return _WORD_RE.findall(text.lower())


def name_words(text: str, min_length: int = 2) -> list[str]:
    """Words of letters (and dashes) as written, at least ``min_length`` long: the words that
    may be a misspelt drug's name ("amoxicilin")."""
    return [w for w in _NAME_WORD_RE.findall(text) if len(w) >= min_length]
