"""Reading UMLS concepts by CUI: one concept, its semantic types, and the drug vocabulary.

Invariants:
- Pure reads on a caller-supplied connection (query-only in the server); nothing here writes.
- A CUI is checked before any query (``InvalidQuery``); an unknown one raises
  ``ConceptNotFound``.
- A concept's semantic types are listed headline first: functional types (T121 Pharmacologic
  Substance, T047 Disease or Syndrome ...) before structure-only ones (T109 Organic Chemical
  ...), then by TUI, so ``search`` and ``get_concept`` name the same headline type.
- The preferred name is the atom of lowest preference rank; ``synonyms`` holds every other
  atom once, in rank order.
"""

from __future__ import annotations

import sqlite_utils

from mcp_servers.umls.foundation import (
    CUI_RE,
    DRUG_TUIS,
    STRUCTURAL_TUIS,
    ConceptNotFound,
    InvalidQuery,
)


def concept_types(db: sqlite_utils.Database, cui: str) -> list[dict]:
    """Semantic types of ``cui``, the headline type first (functional before structural, then TUI)."""
    rows = db.execute("SELECT tui, sty FROM semtypes WHERE cui = ?", [cui]).fetchall()
    rows.sort(key=lambda r: (r[0] in STRUCTURAL_TUIS, r[0]))
    return [{"tui": tui, "name": sty} for tui, sty in rows]


def check_cui(cui: str) -> str:
    """``cui`` trimmed and upper-cased; ``InvalidQuery`` unless it is C followed by seven digits."""
    cui = (cui or "").strip().upper()
    if not CUI_RE.match(cui):
        raise InvalidQuery("a CUI is the letter C followed by seven digits, for example C0020538")
    return cui


def get_concept(db: sqlite_utils.Database, cui: str) -> dict:
    """Preferred name, semantic types, codes and every other name of one concept."""
    cui = check_cui(cui)
    row = db.execute("SELECT name, snomed_code, rxnorm, loinc FROM concepts WHERE cui = ?", [cui]).fetchone()
    if row is None:
        raise ConceptNotFound(cui)
    name, snomed, rxnorm, loinc = row
    atoms = db.execute(
        "SELECT str, sab, tty, code FROM atoms WHERE cui = ? ORDER BY pref_rank, id", [cui]
    ).fetchall()
    synonyms, seen = [], set()
    for text, sab, tty, code in atoms[1:]:  # atoms[0] is the preferred name (lowest rank)
        if (text, sab, tty, code) not in seen:
            seen.add((text, sab, tty, code))
            synonyms.append({"name": text, "source": sab, "term_type": tty, "code": code or None})
    return {
        "cui": cui, "name": name, "semantic_types": concept_types(db, cui),
        "codes": {"snomed_code": snomed, "rxnorm": rxnorm, "loinc": loinc},
        "synonyms": synonyms,
    }


def semantic_types(db: sqlite_utils.Database, cui: str) -> dict:
    """The semantic types of one concept and whether it is a drug (``DRUG_TUIS``)."""
    cui = check_cui(cui)
    row = db.execute("SELECT name FROM concepts WHERE cui = ?", [cui]).fetchone()
    if row is None:
        raise ConceptNotFound(cui)
    types = concept_types(db, cui)
    return {"cui": cui, "name": row[0], "semantic_types": types,
            "is_drug": any(t["tui"] in DRUG_TUIS for t in types)}


def drug_names(db: sqlite_utils.Database) -> list[str]:
    """Sorted, case-insensitively unique names (<= 60 characters) of every drug concept."""
    rows = db.execute(
        f"SELECT DISTINCT a.str FROM atoms a WHERE length(a.str) <= 60 AND a.cui IN "
        f"(SELECT cui FROM semtypes WHERE tui IN ({', '.join('?' for _ in DRUG_TUIS)}))",
        list(DRUG_TUIS),
    ).fetchall()
    by_key: dict[str, str] = {}
    for (text,) in sorted(rows):
        by_key.setdefault(text.casefold(), text)
    return [by_key[k] for k in sorted(by_key)]
