"""The agent's one tokeniser: lower-case words and numbers.

Invariants: "500mg" and "500 mg" both give ["500", "mg"]; a decimal stays one number
("2.5"); punctuation, apostrophes and dashes split words ("pat-002" gives ["pat", "002"]).
Every comparison of words in the agent (a write's values against the clinician's words, a
copied run, an answer's overlap with its findings, a name picked from a list) uses it.
"""

from __future__ import annotations

import re

_WORD_RE = re.compile(r"[a-z]+|\d+(?:\.\d+)?")


def words(text: str) -> list[str]:
    """Lower-case words and numbers of ``text``, in order."""
    return _WORD_RE.findall(text.lower())
