"""Drug-name normalisation for the knowledge store: the lookup key every name is stored and
searched under, salt and dose words stripped, and openFDA's upper-case brands made readable.

Invariant: pure functions of the text; ``name_key`` is idempotent and every other key is made
from its output.
"""

from __future__ import annotations

import re
import unicodedata

_SALT_WORDS = frozenset(
    "hydrochloride hcl sodium potassium calcium magnesium besylate bisulfate maleate mesylate "
    "succinate tartrate bitartrate sulfate citrate acetate phosphate fumarate hyclate hydrobromide "
    "bromide monohydrate dihydrate trihydrate anhydrous disodium dipotassium".split()
)
_FORM_WORDS = frozenset(
    "tablet tablets tab tabs capsule capsules cap caps oral solution suspension injection "
    "syrup er xr sr dr cr ec ir la".split()
)


def name_key(name: str) -> str:
    """Lower-case, punctuation-free, single-spaced form used for every name lookup."""
    text = unicodedata.normalize("NFKC", name).lower()
    text = re.sub(r"[®™©]", "", text)
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def strip_salt(key: str) -> str:
    """'warfarin sodium' -> 'warfarin'; leaves names that are only salt words ('magnesium sulfate')."""
    words = key.split()
    while len(words) > 1 and words[-1] in _SALT_WORDS and not all(w in _SALT_WORDS for w in words[:-1]):
        words.pop()
    return " ".join(words)


def strip_dose(key: str) -> str:
    """'metformin 500 mg tablets' -> 'metformin': drop from the first number, then form words."""
    words = key.split()
    for i, word in enumerate(words):
        if i > 0 and word[0].isdigit():
            words = words[:i]
            break
    while len(words) > 1 and words[-1] in _FORM_WORDS:
        words.pop()
    return " ".join(words)


def lookup_keys(name: str) -> list[str]:
    """Candidate keys for a user-supplied drug name, most literal first."""
    key = name_key(name)
    keys = []
    for candidate in (key, strip_salt(key), strip_dose(key), strip_salt(strip_dose(key))):
        if candidate and candidate not in keys:
            keys.append(candidate)
    return keys


def display_name(name: str) -> str:
    """openFDA brand names are upper case ('TYLENOL'); show them as 'Tylenol', keep 'XR', 'IB'."""
    name = " ".join(name.split())
    if not name.isupper():
        return name
    def part(text: str) -> str:
        letters = re.sub(r"[^A-Z]", "", text)
        return text if len(letters) <= 2 or letters in {"ODT", "HCT"} else text.capitalize()

    return " ".join("-".join(part(p) for p in word.split("-")) for word in name.split(" "))
