"""One resolution of a drug name to its ingredients, for every check of the safety gate.

``ingredients_of(name) -> frozenset[str]`` unites three sources:

1. The curated tables (``classes.ingredients_in``): ingredient names, curated aliases and the
   RxNorm catalogue, wherever they appear in the name.
2. The input side's drug-name recogniser (``appliance.medication.names``: our overlay and the
   bundled dictionary): the generic for the whole name, else for each drug mentioned in it, so
   brands resolve ("Zosyn" -> piperacillin-tazobactam, "MS Contin" -> morphine) and salt and
   release words are dropped ("metoprolol succinate").
3. Synonyms: a mapping given to ``DrugResolver`` (name -> ingredient name), and a ``synonym_of``
   look-up (the UMLS subset's exact synonyms and brands, ``knowledge.SynonymLookup``) asked only
   when the first two find nothing.

A generic that joins drug names with hyphens is a combination and is split into its parts
("acetaminophen-aspirin-caffeine"); a hyphenated name whose parts are not all drug names stays
whole ("interferon alfa-2b"). Each part is named the way ``classes`` names ingredients
(``DrugResolver.canonical``): curated aliases applied ("phenoxymethylpenicillin" -> penicillin v,
"paracetamol" -> acetaminophen), trailing salt and dose-form words dropped ("rosuvastatin
calcium", "fentanyl patch"; never down to a bare salt: "potassium chloride" stays), and an acid
named by its anion where that is the curated name ("clavulanic acid" -> clavulanate).

Invariants:
- Total and pure: any string gives a frozenset (empty when nothing is known) of names in
  ``classes.fold`` form; no I/O apart from the recogniser's one read of the bundled dictionary,
  once per process (``default_resolver``), and the caller's ``synonym_of``.
- It only adds: a name's curated ingredients (``classes.ingredients_in``) are always in its
  result, so nothing the curated table matched is lost.
- The recogniser is the floor below (``appliance.medication``); nothing here imports the agent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from appliance.medication.names import SUFFIX_WORDS, DrugRecogniser
from appliance.safety.classes import fold, ingredients_in, ingredients_named

# A name -> the ingredient (or product) name it is a synonym of, or None (the UMLS subset).
SynonymOf = Callable[[str], "str | None"]

# Dose-form and route words a dictionary's generic may carry ("fentanyl patch", "nitroglycerin
# sublingual", "buprenorphine sublingual-buccal"): like salt words, not part of the ingredient.
FORM_WORDS = frozenset("""
    patch patches transdermal sublingual buccal oral topical vaginal rectal nasal ophthalmic otic
    inhaled inhalation inhaler injection injectable intravenous subcutaneous tablet tablets capsule
    capsules solution suspension syrup elixir cream ointment gel lotion spray drops chewable extended
    delayed immediate release liposomal
""".split())
_DROPPED = SUFFIX_WORDS | FORM_WORDS
MAX_CACHED = 4096  # resolved names kept per resolver (a matrix run resolves a few thousand)


class DrugResolver:
    """Drug names to ingredient names (module docstring). ``synonyms`` maps further names
    (folded or not) to an ingredient or product name, resolved in turn."""

    def __init__(self, recogniser: DrugRecogniser, synonyms: Mapping[str, str] | None = None):
        self._recogniser = recogniser
        self._synonyms = {fold(k): v for k, v in (synonyms or {}).items() if fold(k)}
        self._cache: dict[str, frozenset[str]] = {}

    @property
    def recogniser(self) -> DrugRecogniser:
        """The drug-name recogniser it resolves through (the order parser reads names with it too)."""
        return self._recogniser

    def ingredients_of(self, name: str, synonym_of: SynonymOf | None = None) -> frozenset[str]:
        """Every ingredient the name is known to contain; ``synonym_of`` is asked (once) only
        when nothing else knows the name."""
        text = " ".join(str(name or "").split())
        found = self._cache.get(text)
        if found is None:
            found = self._known(text)
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            self._cache[text] = found
        if not found and synonym_of is not None and text:
            other = synonym_of(text)
            if other and fold(other) != fold(text):
                found = self._known(other)
        return found

    def _known(self, text: str) -> frozenset[str]:
        found = set(ingredients_in(text))
        whole = self._recogniser.generic(text)
        generics = [whole] if whole else [m.generic for m in self._recogniser.mentions(text)]
        for generic in generics:
            found |= self.parts(generic)
        other = self._synonyms.get(fold(text))
        if other and fold(other) != fold(text):
            found |= self._known(other)
        return frozenset(found)

    def parts(self, generic: str) -> frozenset[str]:
        """A generic's ingredients: each part of a hyphenated combination, or the generic itself,
        in curated naming (``canonical``)."""
        pieces = [p.strip() for p in str(generic or "").split("-") if p.strip()]
        if len(pieces) > 1 and all(self._is_drug(p) for p in pieces):
            return frozenset(i for p in pieces for i in self.canonical(p))
        return self.canonical(generic)

    def _is_drug(self, name: str) -> bool:
        return bool(ingredients_named(name) or self._recogniser.generic(name) or ingredients_named(_bare(fold(name))))

    def canonical(self, name: str, _again: bool = True) -> frozenset[str]:
        """One ingredient name as ``classes`` names it (module docstring)."""
        words = fold(name).split()
        while words:
            hit = ingredients_named(" ".join(words)) or _as_anion(words)
            if hit:
                return frozenset(hit)
            if len(words) > 1 and words[-1] in _DROPPED and not set(words[:-1]) <= SUFFIX_WORDS:
                words = words[:-1]
                continue
            break
        key = " ".join(words)
        if _again and key:
            other = self._recogniser.generic(key)
            if other and "-" not in other and fold(other) != key:
                return self.canonical(other, _again=False)
        return frozenset({key}) if key else frozenset()


def _bare(key: str) -> str:
    words = key.split()
    while len(words) > 1 and words[-1] in _DROPPED and not set(words[:-1]) <= SUFFIX_WORDS:
        words = words[:-1]
    return " ".join(words)


def _as_anion(words: list[str]) -> tuple[str, ...]:
    """"clavulanic acid" -> clavulanate, where the curated tables name the anion."""
    if len(words) >= 2 and words[-1] == "acid" and words[-2].endswith("ic"):
        return ingredients_named(" ".join(words[:-2] + [words[-2][:-2] + "ate"]))
    return ()


@functools.cache
def default_resolver() -> DrugResolver:
    """The process's resolver: the recogniser with the bundled dictionary, built once (~1 s)."""
    return DrugResolver(DrugRecogniser())


def ingredients_of(name: str, synonym_of: SynonymOf | None = None) -> frozenset[str]:
    """Every ingredient of a drug name, through the process's resolver (module docstring)."""
    return default_resolver().ingredients_of(name, synonym_of)


__all__ = ["FORM_WORDS", "DrugResolver", "SynonymOf", "default_resolver", "ingredients_of"]
