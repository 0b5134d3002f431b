"""Building the cached-UMLS concept store: the shipped starter subset and the shared content build.

The store's shape is in ``umls.foundation``; ``umls.search`` and ``umls.lookup`` read it, and
``umls.importer`` loads a licensed release through the same build functions as the starter subset.

Invariants:
- Content is built in one transaction from *atoms* (one row per name string of a concept, with
  source vocabulary SAB, term type TTY, source code and a preference rank) plus semantic-type
  rows. The shipped starter subset and the RRF importer both go through ``clear_content`` ->
  ``insert_atoms`` / ``insert_semtypes`` -> ``finalize``, so both give the same schema and the
  same search behaviour. ``finalize`` derives ``concepts`` (preferred name = lowest rank atom,
  SNOMED / RxNorm / LOINC code from the best atom of that source) and rebuilds the search
  indexes (full-text ``atoms_fts`` and the typo index ``words`` / ``word_deletes``).
- Builders hold the build lock (``common.sqlite.building``), so two never build at once.
- ``meta.content`` is ``starter`` or ``rrf``: ``ensure_database`` never replaces imported content.
- ``ensure_database`` is idempotent: with an unchanged starter file and migrations a second call
  changes nothing (``meta.starter_hash``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import sqlite_utils

from common import sqlite
from common.sqlite import get_meta, set_meta, write_transaction
from mcp_servers.umls.foundation import (
    CUI_RE,
    MIGRATIONS,
    SEMANTIC_TYPES,
    STORE,
    deletions,
    norm,
)

DATA_DIR = Path(__file__).resolve().parent / "data"
STARTER_FILE = DATA_DIR / "concepts.tsv"

Progress = Callable[[str], None] | None

# Preference ranks of starter atoms (lower is preferred); the importer computes its own.
STARTER_RANKS = {"PN": 0, "SY": 10, "BN": 15, "AB": 20}
STARTER_SAB = "CURATED"


# -- content build (shared by the starter loader and the RRF importer) -----------------------
def clear_content(db: sqlite_utils.Database) -> None:
    for table in ("concepts", "atoms", "semtypes", "words", "word_deletes"):
        db.execute(f"DELETE FROM [{table}]")
    db.execute("INSERT INTO atoms_fts(atoms_fts) VALUES ('delete-all')")


def insert_atoms(db: sqlite_utils.Database, rows: Iterable[tuple[str, str, str, str, str, int]]) -> int:
    """Insert (cui, string, sab, tty, code, pref_rank) rows; names that normalise to '' are dropped."""
    batch = [(c, s, n, sab, tty, code, rank) for c, s, sab, tty, code, rank in rows if (n := norm(s))]
    db.conn.executemany(
        "INSERT INTO atoms (cui, str, norm, sab, tty, code, pref_rank) VALUES (?, ?, ?, ?, ?, ?, ?)", batch
    )
    return len(batch)


def insert_semtypes(db: sqlite_utils.Database, rows: Iterable[tuple[str, str, str]]) -> None:
    db.conn.executemany("INSERT OR IGNORE INTO semtypes (cui, tui, sty) VALUES (?, ?, ?)", list(rows))


def finalize(db: sqlite_utils.Database, say: Callable[[str], None] = lambda _m: None) -> int:
    """Derive concepts and codes from the atoms and rebuild FTS and the fuzzy index; return concept count.

    ``say`` is told each stage as it starts (derived concepts, full-text index, typo index)."""
    say("deriving concepts and codes")
    # SQLite takes the bare columns of a MIN() aggregate from the row holding the minimum.
    db.execute(
        "INSERT INTO concepts (cui, name, atom_count) SELECT cui, str, n FROM ("
        "SELECT cui, str, MIN(pref_rank * 10000000000 + id), COUNT(*) AS n FROM atoms GROUP BY cui)"
    )
    for column, sab, order in (
        ("snomed_code", "SNOMEDCT_US", "CASE tty WHEN 'PT' THEN 0 WHEN 'FN' THEN 1 ELSE 2 END"),
        ("rxnorm", "RXNORM", "CASE tty WHEN 'IN' THEN 0 WHEN 'PIN' THEN 1 WHEN 'MIN' THEN 2 WHEN 'BN' THEN 3 ELSE 4 END"),
        ("loinc", "LNC", "CASE tty WHEN 'LN' THEN 0 ELSE 1 END"),
    ):
        db.execute(
            f"UPDATE concepts SET {column} = (SELECT code FROM atoms a WHERE a.cui = concepts.cui AND a.sab = ? "
            f"AND a.code != '' ORDER BY {order}, a.id LIMIT 1)",
            [sab],
        )
    db.execute("DELETE FROM semtypes WHERE cui NOT IN (SELECT cui FROM concepts)")
    say("building the full-text index")
    db.execute("INSERT INTO atoms_fts(atoms_fts) VALUES ('rebuild')")
    say("building the typo index")
    cursor = db.conn.execute("SELECT term, doc FROM atoms_vocab WHERE length(term) >= 3")
    while chunk := cursor.fetchmany(5000):
        words, deletes = [], []
        for term, freq in chunk:
            if term.isdigit():
                continue
            words.append((term, freq))
            deletes.append((term, term))
            if 4 <= len(term) <= 24:
                deletes.extend((d, term) for d in deletions(term))
        db.conn.executemany("INSERT INTO words (word, freq) VALUES (?, ?)", words)
        db.conn.executemany("INSERT INTO word_deletes (del, word) VALUES (?, ?)", deletes)
    return db.execute("SELECT COUNT(*) FROM concepts").fetchone()[0]


# -- shipped starter subset ------------------------------------------------------------------
def _split(cell: str) -> list[str]:
    return [part.strip() for part in cell.split(";") if part.strip()]


TYPE_NOT_RECORDED = "-"  # the tuis cell of a concept whose semantic type is not confirmed


def read_starter(path: Path = STARTER_FILE) -> list[dict]:
    """Parse and validate the shipped TSV (see data/PROVENANCE.md for the format)."""
    concepts, seen = [], set()
    header = None
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if header is None:
            header = cells
            continue
        if len(cells) != len(header):
            raise ValueError(f"{path.name}:{lineno}: expected {len(header)} columns, got {len(cells)}")
        row = dict(zip(header, (c.strip() for c in cells)))
        # "-": the CUI is confirmed but its semantic type is not, so none is claimed
        tuis = [] if row["tuis"] == TYPE_NOT_RECORDED else _split(row["tuis"])
        problems = [
            "bad CUI" if not CUI_RE.match(row["cui"]) else "",
            "duplicate CUI" if row["cui"] in seen else "",
            "unknown TUI" if (not tuis and row["tuis"] != TYPE_NOT_RECORDED)
            or any(t not in SEMANTIC_TYPES for t in tuis) else "",
            "bad SNOMED code" if row["snomed"] and not row["snomed"].isdigit() else "",
            "bad RxNorm code" if row["rxnorm"] and not row["rxnorm"].isdigit() else "",
            "bad LOINC code" if row["loinc"] and not re.fullmatch(r"\d{1,7}-\d", row["loinc"]) else "",
        ]
        if any(problems):
            raise ValueError(f"{path.name}:{lineno}: {', '.join(p for p in problems if p)}")
        seen.add(row["cui"])
        concepts.append({
            "cui": row["cui"], "name": row["name"], "tuis": tuis, "snomed": row["snomed"] or None,
            "rxnorm": row["rxnorm"] or None, "loinc": row["loinc"] or None, "synonyms": _split(row["synonyms"]),
            "abbreviations": _split(row["abbreviations"]), "brands": _split(row["brands"]),
        })
    return concepts


def starter_atoms(concept: dict, include_preferred: bool = True) -> list[tuple[str, str, str, str, str, int]]:
    cui = concept["cui"]
    named = [(concept["name"], "PN")] if include_preferred else []
    named += [(s, "SY") for s in concept["synonyms"]] + [(b, "BN") for b in concept["brands"]]
    named += [(a, "AB") for a in concept["abbreviations"]]
    return [(cui, text, STARTER_SAB, tty, "", STARTER_RANKS[tty]) for text, tty in named]


def load_starter(db: sqlite_utils.Database, say: Callable[[str], None] = lambda _m: None) -> int:
    """Replace the content with the shipped subset (inside the caller's transaction)."""
    concepts = read_starter()
    clear_content(db)
    for concept in concepts:
        insert_atoms(db, starter_atoms(concept))
        insert_semtypes(db, [(concept["cui"], t, SEMANTIC_TYPES[t]) for t in concept["tuis"]])
    count = finalize(db, say)
    db.conn.executemany(
        "UPDATE concepts SET snomed_code = ?, rxnorm = ?, loinc = ? WHERE cui = ?",
        [(c["snomed"], c["rxnorm"], c["loinc"], c["cui"]) for c in concepts],
    )
    return count


def _starter_hash() -> str:
    digest = hashlib.sha256(",".join(m.__name__ for m in MIGRATIONS).encode())
    digest.update(STARTER_FILE.read_bytes())
    return digest.hexdigest()


def ensure_database(path: Path, progress: Progress = None) -> None:
    """Create or migrate the UMLS database at ``path`` and load the shipped starter subset.

    Idempotent: with an unchanged starter file a second call changes nothing. A database holding
    imported (RRF) content is migrated but its content is left alone.
    """
    say = progress or (lambda _msg: None)
    with sqlite.building(path, STORE, MIGRATIONS, say) as db:
        if get_meta(db, "content") == "rrf":
            say("imported UMLS content present; starter subset not loaded")
            return
        digest = _starter_hash()
        if get_meta(db, "starter_hash") == digest:
            say("UMLS starter subset up to date")
            return
        with write_transaction(db):
            count = load_starter(db, say)
            set_meta(db, "content", "starter")
            set_meta(db, "starter_hash", digest)
        say(f"UMLS starter subset loaded: {count} concepts")
