"""Drug names in a clinician's message, resolved to generic names (docs/design.md §4.1).

Three sources, the first that knows a name wins:

1. Our overlay, ``data/drug_overlay.tsv``: fixed-dose combinations as clinicians chart them
   ("pip-tazo", "TMP-SMX", "co-amoxiclav"), British and INN names whose US name the knowledge
   server uses, and the few common drugs the bundled dictionary lacks.
2. The dictionary bundled with ``drug-named-entity-recognition`` 2.0.9 (MIT; names from
   DrugBank, MeSH, MedlinePlus and the NHS, brand names resolved to generics).
3. The names the local knowledge and UMLS servers report (``ToolBox.drug_names``), so every
   import still widens the vocabulary; a name neither source above knows stands for itself.

Invariants:
- A mention resolves to one generic name, lower case, in US spelling (the knowledge server's
  keys): "Tylenol" and "paracetamol" give "acetaminophen", "salbutamol" gives "albuterol".
- A known fixed-dose combination is one mention with its conventional name
  ("amoxicillin/clavulanate", "co-amoxiclav" and "Augmentin" give "amoxicillin-clavulanate");
  other drugs joined by a hyphen or slash are separate mentions ("aspirin/clopidogrel").
- A key on the stop list (``data/drug_stoplist.txt``: English words, person names, laboratory
  analytes, drug classes) is never a drug mention, whatever its source; neither is a name
  shorter than 3 characters.
- Matching is whole-token, case-insensitive and longest-first; no network and no model.
- The library's module is never imported: at import it builds a fuzzy-matching index we do not
  use (1.4 s and about 350 MB). Its bundled data file is read once per process instead.
"""

from __future__ import annotations

import bz2
import functools
import importlib.util
import logging
import pickle
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
LIBRARY = "drug_named_entity_recognition"
LIBRARY_DATA = "drug_ner_dictionary.pkl.bz2"
MAX_TOKENS = 8  # longest name matched, in tokens ("abacavir, dolutegravir, and lamivudine" is 4)
MIN_CHARS = 3

# Words with an optional hyphen or apostrophe inside ("co-amoxiclav", "ringer's"); "/" and
# everything else separate tokens.
TOKEN_RE = re.compile(r"[A-Za-z0-9]+(?:[-'\u2019][A-Za-z0-9]+)*")
_VARIANT_CHARS = re.compile(r"[a-z0-9][a-z0-9 ,/()'.+\-]*")
_COMBINATION_SPLIT = re.compile(r"\s*(?:/|\+|,?\s+and\s+|,\s*)\s*")
_COMBINATION = re.compile(r"/|\+|\sand\s")
# Salt, ester and release words after a drug name belong to its mention and change nothing
# about the drug: "clindamycin phosphate", "epoetin alfa", "metformin XR", "Lupron Depot".
SUFFIX_WORDS = frozenset("""
    hydrochloride hcl hydrobromide sodium potassium calcium magnesium disodium phosphate sulfate
    sulphate acetate tartrate succinate maleate mesylate besylate bisulfate citrate fumarate
    bromide chloride hyclate monohydrate dihydrate trihydrate furoate propionate dipropionate
    valerate pamoate decanoate enanthate cypionate lactate gluconate nitrate oxalate tosylate
    malate meglumine dimeglumine alfa er xr sr cr xl la mr dr ir odt depot
""".split())
_QUALIFIER = re.compile(r"\s*\([^)]*\)")
# An entry known only to MeSH is dropped when every tree number lies in these branches:
# enzymes, proteins, antigens, nucleic acids, other macromolecules, carbohydrates, lipids and
# pharmacologic classes ("anti-bacterial agents"): biochemistry and laboratory words, not
# drugs. Hormones (insulin, vasopressin) are D06 and stay, as do chemicals (D01-D04, vitamin K).
_NON_DRUG_MESH_BRANCHES = ("D05", "D08", "D09", "D10", "D12", "D13", "D23", "D27")


def key_of(text: str) -> str:
    """The matching key: lower-case tokens joined by one space ("Rho(D) immune globulin" ->
    "rho d immune globulin")."""
    return " ".join(t.lower().replace("\u2019", "'") for t in TOKEN_RE.findall(text))


@dataclass(frozen=True)
class Mention:
    """One drug in a message: the words as written, their span, and the generic name."""

    text: str
    generic: str
    start: int
    end: int


@functools.cache
def overlay() -> dict[str, str]:
    """Our names: key -> generic, from ``data/drug_overlay.tsv``."""
    names: dict[str, str] = {}
    for line in (DATA_DIR / "drug_overlay.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, generic = line.split("\t")[:2]
            names[key_of(name)] = generic.strip().lower()
    return names


@functools.cache
def stoplist() -> frozenset[str]:
    """Keys that are never drug mentions, from ``data/drug_stoplist.txt``."""
    lines = (DATA_DIR / "drug_stoplist.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(key_of(w) for w in (line.split("#", 1)[0].strip() for line in lines) if w)


def _usable_key(key: str) -> bool:
    return len(key) >= MIN_CHARS and max(len(t) for t in key.split(" ")) >= MIN_CHARS and key not in stoplist()


def _is_drug_entry(data: dict) -> bool:
    if data.get("drugbank_id") or data.get("medline_plus_id") or data.get("nhs_url"):
        return True
    trees = data.get("mesh_tree") or []
    return not trees or not all(t.startswith(_NON_DRUG_MESH_BRANCHES) for t in trees)


def _load_library() -> dict:
    spec = importlib.util.find_spec(LIBRARY)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{LIBRARY} is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / LIBRARY_DATA
    with bz2.open(path, "rb") as f:
        return pickle.load(f)  # the package's own data file: trusted as much as its code


def _library_entries() -> tuple[dict[str, str], dict[str, str]]:
    """(single-drug names, combination names): key -> the library's generic name, lower case."""
    try:
        data = _load_library()
        variants, entries = data["drug_variant_to_canonical"], data["drug_canonical_to_data"]
    except Exception as exc:  # noqa: BLE001 - a missing hint source must not stop the agent
        log.warning("the bundled drug dictionary could not be read (%s); only local drug names are recognised", exc)
        return {}, {}
    singles: dict[str, str] = {}
    combos: dict[str, str] = {}
    for variant, canonicals in variants.items():
        if len(canonicals) != 1 or not _VARIANT_CHARS.fullmatch(variant) or not variant[-1].isalnum():
            continue
        entry = entries.get(canonicals[0], {})
        if not _is_drug_entry(entry):
            continue
        key = key_of(variant)
        if not _usable_key(key):
            continue
        generic = _QUALIFIER.sub("", entry.get("name") or canonicals[0]).strip(" ,").lower()
        if _COMBINATION.search(generic):
            combos[key] = generic
        else:  # MeSH's inverted names: "insulin, isophane" is isophane insulin
            singles[key] = " ".join(reversed(generic.split(", ")))
    return singles, combos


@functools.cache
def library_lexicon() -> dict[str, str]:
    """Key -> generic for every usable name in the bundled dictionary, our overlay's spelling
    of the generic applied (empty, with a warning, when the package or its data cannot be
    read: the recogniser then knows our overlay and local names only)."""
    singles, combos = _library_entries()
    names = overlay()
    lexicon = {k: names.get(key_of(g), g) for k, g in singles.items()}
    by_parts = _combination_names(lexicon)
    for key, generic in combos.items():
        parts = [_single(p, lexicon) for p in _COMBINATION_SPLIT.split(generic) if p]
        lexicon[key] = names.get(key_of(generic)) or by_parts.get(frozenset(parts)) or "-".join(parts)
    return lexicon


def _single(name: str, lexicon: dict[str, str]) -> str:
    key = key_of(name)
    return overlay().get(key) or lexicon.get(key) or name.strip().lower()


def _combination_names(lexicon: dict[str, str]) -> dict[frozenset[str], str]:
    """Component generics -> conventional name, for every overlay generic that is a
    hyphenated combination of drugs ("amoxicillin-clavulanate": {amoxicillin, clavulanic acid})."""
    found = {}
    for generic in set(overlay().values()):
        parts = generic.split("-")
        if len(parts) > 1 and " " not in generic and all(key_of(p) in lexicon or key_of(p) in overlay() for p in parts):
            found[frozenset(_single(p, lexicon) for p in parts)] = generic
    return found


@functools.cache
def combination_names() -> dict[frozenset[str], str]:
    return _combination_names(library_lexicon())


class DrugRecogniser:
    """Finds drug mentions and returns their generic names.

    ``local_names`` are the names the tool box reports (scripted tests pass a short list);
    they widen the vocabulary and never replace the bundled dictionary.
    """

    def __init__(self, local_names: Iterable[str] = (), *, bundled: bool = True):
        self._overlay = overlay()
        self._library = library_lexicon() if bundled else {}
        self._combos = combination_names()
        local: dict[str, str] = {}
        for name in local_names:
            key = key_of(name or "")
            if key and _usable_key(key) and key not in self._overlay and key not in self._library:
                local[key] = " ".join(name.split()).lower()
        self._local = local

    def generic(self, name: str) -> str | None:
        """The generic name for one drug name, or None if it is not a known drug name."""
        return self._lookup(key_of(name))

    def _lookup(self, key: str) -> str | None:
        return self._overlay.get(key) or self._library.get(key) or self._local.get(key)

    def mentions(self, text: str) -> list[Mention]:
        tokens = [(m.start(), m.end(), m.group(0).lower().replace("\u2019", "'")) for m in TOKEN_RE.finditer(text)]
        found: list[Mention] = []
        i = 0
        while i < len(tokens):
            for n in range(min(MAX_TOKENS, len(tokens) - i), 0, -1):
                generic = self._lookup(" ".join(t[2] for t in tokens[i:i + n]))
                if generic:
                    start, i = tokens[i][0], i + n
                    while i < len(tokens) and tokens[i][2] in SUFFIX_WORDS and not text[tokens[i - 1][1]:tokens[i][0]].strip():
                        i += 1
                    end = tokens[i - 1][1]
                    found.append(Mention(text[start:end], generic, start, end))
                    break
            else:
                found += self._hyphen_parts(text, tokens[i])
                i += 1
        return self._join_combinations(text, found)

    def _hyphen_parts(self, text: str, token: tuple[int, int, str]) -> list[Mention]:
        """Drugs inside a hyphenated word that is not itself a name ("warfarin-induced",
        "ceftazidime-avibactam")."""
        start, _end, word = token
        parts, offset = [], start
        for part in word.split("-"):
            generic = self._lookup(part)
            if generic:
                parts.append(Mention(text[offset:offset + len(part)], generic, offset, offset + len(part)))
            offset += len(part) + 1
        return parts

    def _join_combinations(self, text: str, found: list[Mention]) -> list[Mention]:
        """Adjacent mentions joined by "/" or "-" that make a known combination become one."""
        joined: list[Mention] = []
        i = 0
        while i < len(found):
            j = i
            while j + 1 < len(found) and text[found[j].end:found[j + 1].start].strip() in ("/", "-"):
                j += 1
            for k in range(j, i, -1):  # the longest known combination starting at i
                name = self._combos.get(frozenset(m.generic for m in found[i:k + 1]))
                if name:
                    start, end = found[i].start, found[k].end
                    joined.append(Mention(text[start:end], name, start, end))
                    i = k + 1
                    break
            else:
                joined.append(found[i])
                i += 1
        return joined

    def find(self, text: str) -> tuple[str, ...]:
        """Generic names of the drugs mentioned, in order of first mention, each once."""
        return tuple(dict.fromkeys(m.generic for m in self.mentions(text)))
