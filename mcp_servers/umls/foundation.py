"""The UMLS concept store's foundation: its tables, migrations, name form, types and errors.

The other modules of ``umls`` build on this one: ``umls.store`` builds the content,
``umls.search`` ranks concepts for a term, ``umls.lookup`` reads one concept by CUI, and
``umls.importer`` loads a licensed release.

Invariants:
- One SQLite file (``umls.sqlite``) opened through ``common.sqlite`` (WAL, busy timeout,
  integrity check at the first writable open: builders check it, readers do not). Connections
  are per call (tools may run in worker threads); read connections are ``query_only``.
  Commits are not fsynced one by one (``durable=False``):
  the content is rebuilt from the shipped subset or an RRF release.
- Schema changes are named, append-only migration functions recorded under the migration set
  ``umls``.
- Tables: ``atoms`` (one row per name string of a concept: source vocabulary SAB, term type
  TTY, source code, preference rank, and ``norm``, the name in the form ``norm`` gives),
  ``concepts`` (derived from the atoms), ``semtypes``, the external-content FTS5 index
  ``atoms_fts`` over ``atoms.norm``, ``words`` / ``word_deletes`` (the typo index: see
  ``deletions``) and ``meta``.
- ``norm`` is the only form names are stored and looked up in: every writer and every reader
  uses it, so a lookup never misses a name because of case, apostrophes or punctuation.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import sqlite_utils

from common import sqlite

CUI_RE = re.compile(r"^C\d{7}$")

# UMLS Semantic Network types used by the starter subset (TUI -> name); imports carry their own.
SEMANTIC_TYPES: dict[str, str] = {
    "T005": "Virus", "T007": "Bacterium", "T019": "Congenital Abnormality", "T020": "Acquired Abnormality",
    "T023": "Body Part, Organ, or Organ Component", "T032": "Organism Attribute", "T033": "Finding",
    "T034": "Laboratory or Test Result", "T037": "Injury or Poisoning", "T039": "Physiologic Function",
    "T040": "Organism Function", "T042": "Organ or Tissue Function", "T046": "Pathologic Function",
    "T047": "Disease or Syndrome", "T048": "Mental or Behavioral Dysfunction", "T055": "Individual Behavior",
    "T058": "Health Care Activity", "T059": "Laboratory Procedure", "T060": "Diagnostic Procedure",
    "T061": "Therapeutic or Preventive Procedure", "T081": "Quantitative Concept", "T109": "Organic Chemical",
    "T116": "Amino Acid, Peptide, or Protein", "T121": "Pharmacologic Substance", "T125": "Hormone",
    "T127": "Vitamin", "T129": "Immunologic Factor", "T131": "Hazardous or Poisonous Substance",
    "T168": "Food", "T184": "Sign or Symptom", "T191": "Neoplastic Process", "T195": "Antibiotic",
    "T196": "Element, Ion, or Isotope", "T197": "Inorganic Chemical", "T200": "Clinical Drug",
    "T201": "Clinical Attribute",
}
# A concept is a drug when it has one of these types; chemical-structure types (T109 Organic
# Chemical, T116, T197 ...) count only together with one of them.
DRUG_TUIS = ("T121", "T195", "T200")
# Structure-only types sort after functional ones when picking a concept's headline type.
STRUCTURAL_TUIS = frozenset({"T104", "T109", "T110", "T111", "T114", "T116", "T118", "T119", "T196", "T197"})


class UmlsError(Exception):
    """Base class of the UMLS store's expected failures."""


class InvalidQuery(UmlsError):
    """The search term or identifier is empty or malformed."""


class ConceptNotFound(UmlsError):
    """No concept has this CUI."""


class NoMatch(UmlsError):
    """No concept matches the search term."""


# -- schema ------------------------------------------------------------------------------------
def m001_initial(db: sqlite_utils.Database) -> None:
    db["concepts"].create(
        {"cui": str, "name": str, "snomed_code": str, "rxnorm": str, "loinc": str, "atom_count": int},
        pk="cui", not_null=["name"],
    )
    db.execute(
        "CREATE TABLE atoms (id INTEGER PRIMARY KEY, cui TEXT NOT NULL, str TEXT NOT NULL, norm TEXT NOT NULL, "
        "sab TEXT NOT NULL, tty TEXT NOT NULL, code TEXT NOT NULL, pref_rank INTEGER NOT NULL)"
    )
    db.execute("CREATE INDEX atoms_norm ON atoms (norm)")
    db.execute("CREATE INDEX atoms_cui_sab ON atoms (cui, sab)")
    db["semtypes"].create({"cui": str, "tui": str, "sty": str}, pk=("cui", "tui"))
    db["semtypes"].create_index(["tui"])
    db["words"].create({"word": str, "freq": int}, pk="word")
    db.execute("CREATE TABLE word_deletes (del TEXT NOT NULL, word TEXT NOT NULL)")
    db.execute("CREATE INDEX word_deletes_del ON word_deletes (del)")
    # External-content FTS5 over the normalised names; rebuilt in one go by finalize().
    db.execute(
        "CREATE VIRTUAL TABLE atoms_fts USING fts5(norm, content='atoms', content_rowid='id', "
        "tokenize='unicode61', prefix='2 3')"
    )
    db.execute("CREATE VIRTUAL TABLE atoms_vocab USING fts5vocab(atoms_fts, 'row')")
    db["meta"].create({"key": str, "value": str}, pk="key")


STORE = "umls"  # the migration set's name
MIGRATIONS: tuple[sqlite.Migration, ...] = (m001_initial,)


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations in order; return the names applied."""
    return sqlite.migrate(db, STORE, MIGRATIONS)


def connect(path: Path | str, read_only: bool = False) -> sqlite_utils.Database:
    """A connection of its own to the UMLS database at ``path``."""
    return sqlite.connect(path, read_only=read_only, durable=False)


# -- names -----------------------------------------------------------------------------------
def norm(text: str) -> str:
    """Lower-case, apostrophe- and punctuation-free, single-spaced form used for every lookup."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"['’®™©]", "", text)
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def deletions(word: str) -> set[str]:
    """Every string obtained by deleting one character of ``word``: its keys in ``word_deletes``."""
    return {word[:i] + word[i + 1:] for i in range(len(word))}
