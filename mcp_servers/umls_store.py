"""The cached-UMLS concept store: schema, content build, and concept search.

Invariants:
- One SQLite file (``umls.sqlite``) in WAL mode; every connection sets a busy timeout; read
  connections are ``query_only``. Connections are per call (tools may run in worker threads).
- Schema changes are named, append-only migration functions recorded in ``_migrations``.
- Content is built in one transaction from *atoms* (one row per name string of a concept, with
  source vocabulary SAB, term type TTY, source code and a preference rank) plus semantic-type
  rows. The shipped starter subset and the RRF importer both go through ``clear_content`` ->
  ``insert_atoms`` / ``insert_semtypes`` -> ``finalize``, so both give the same schema and the
  same search behaviour. ``finalize`` derives ``concepts`` (preferred name = lowest rank atom,
  SNOMED / RxNorm / LOINC code from the best atom of that source) and rebuilds the indexes.
- Search indexes, rebuilt by ``finalize``: ``atoms.norm`` (exact lookup of a normalised name),
  FTS5 ``atoms_fts`` over ``norm`` (word and prefix matches), and a word-level *deletion
  neighbourhood* ``word_deletes`` (every vocabulary word of 4-24 characters stored under itself
  and under each string obtained by deleting one character; 3-character words under
  themselves). A query word that is not in the vocabulary is looked up under itself and its own
  one-character deletions; candidates are confirmed with an optimal-string-alignment distance of
  at most 1, so exactly one insertion, deletion, substitution or adjacent transposition in one
  word is corrected. Its size grows with the vocabulary, not with the number of atoms.
- Scores mean one thing: 1.0 exact preferred name; 0.9 exact synonym / abbreviation / brand;
  0.5-0.875 word or prefix match (graded by how much of the matched name the query covers,
  plus 0.075 when the name begins with the query);
  0.45 / 0.4 exact name after a one-edit correction; 0.2-0.3875 word match after a correction
  (the same grading, on half the span).
- ``meta.content`` is ``starter`` or ``rrf``: ``ensure_database`` never replaces imported content.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path
from typing import Callable, Iterable

import sqlite_utils

from mcp_servers import _sqlite
from mcp_servers._sqlite import build_lock, connect, get_meta, set_meta, transaction  # noqa: F401 - the store's API

DATA_DIR = Path(__file__).resolve().parent / "data" / "umls"
STARTER_FILE = DATA_DIR / "concepts.tsv"
CUI_RE = re.compile(r"^C\d{7}$")

Progress = Callable[[str], None] | None

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
_STRUCTURAL_TUIS = frozenset({"T104", "T109", "T110", "T111", "T114", "T116", "T118", "T119", "T196", "T197"})

# Preference ranks of starter atoms (lower is preferred); the importer computes its own.
STARTER_RANKS = {"PN": 0, "SY": 10, "BN": 15, "AB": 20}
STARTER_SAB = "CURATED"


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


MIGRATIONS: tuple[Callable[[sqlite_utils.Database], None], ...] = (m001_initial,)


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations in order; return the names applied."""
    return _sqlite.migrate(db, MIGRATIONS)


# -- names -----------------------------------------------------------------------------------
def norm(text: str) -> str:
    """Lower-case, apostrophe- and punctuation-free, single-spaced form used for every lookup."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"['’®™©]", "", text)
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}


def within_one_edit(a: str, b: str) -> bool:
    """Optimal string alignment distance <= 1 (one insert, delete, substitute or swap)."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    if la == lb:
        diff = [i for i in range(la) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if la < lb else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


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
    """Parse and validate the shipped TSV (see data/umls/PROVENANCE.md for the format)."""
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
    with _sqlite.building(path, MIGRATIONS, say) as db:
        if get_meta(db, "content") == "rrf":
            say("imported UMLS content present; starter subset not loaded")
            return
        digest = _starter_hash()
        if get_meta(db, "starter_hash") == digest:
            say("UMLS starter subset up to date")
            return
        with transaction(db):
            count = load_starter(db, say)
            set_meta(db, "content", "starter")
            set_meta(db, "starter_hash", digest)
        say(f"UMLS starter subset loaded: {count} concepts")


# -- search ----------------------------------------------------------------------------------
MAX_TERM_CHARS = 200
_WORD_ROWS = 300  # FTS matches scored per query (shortest names first)


def _semtypes(db: sqlite_utils.Database, cui: str) -> list[dict]:
    rows = db.execute("SELECT tui, sty FROM semtypes WHERE cui = ?", [cui]).fetchall()
    rows.sort(key=lambda r: (r[0] in _STRUCTURAL_TUIS, r[0]))
    return [{"tui": tui, "name": sty} for tui, sty in rows]


def _offer(hits: dict, cui: str, score: float, atom: tuple, match_type: str) -> None:
    if cui not in hits or score > hits[cui][0]:
        hits[cui] = (round(score, 3), atom, match_type)


def _exact(db, q: str, hits: dict, pref_score: float, syn_score: float, fuzzy: bool) -> None:
    rows = db.execute(
        "SELECT a.cui, a.str, a.sab, a.tty, c.name FROM atoms a JOIN concepts c ON c.cui = a.cui WHERE a.norm = ?",
        [q],
    ).fetchall()
    for cui, text, sab, tty, name in rows:
        preferred = norm(name) == q
        kind = "fuzzy" if fuzzy else ("preferred_name" if preferred else "synonym")
        _offer(hits, cui, pref_score if preferred else syn_score, (text, sab, tty), kind)


def _words(db, q: str, hits: dict, low: float, span: float, fuzzy: bool) -> None:
    tokens = q.split()
    parts = [f'"{t}"' for t in tokens[:-1]]
    parts.append(f'"{tokens[-1]}"*' if len(tokens[-1]) >= 2 else f'"{tokens[-1]}"')
    rows = db.execute(
        "SELECT a.cui, a.str, a.norm, a.sab, a.tty FROM atoms_fts f JOIN atoms a ON a.id = f.rowid "
        "WHERE atoms_fts MATCH ? ORDER BY length(a.norm) LIMIT ?",
        [" ".join(parts), _WORD_ROWS],
    ).fetchall()
    head = span / 4  # a name that begins with the query outranks one that only contains it
    for cui, text, name_norm, sab, tty in rows:
        coverage = min(1.0, len(q) / len(name_norm))
        score = low + span * coverage + (head if name_norm.startswith(q) else 0.0)
        _offer(hits, cui, min(score, low + span + head), (text, sab, tty), "fuzzy" if fuzzy else "word")


def corrections(db: sqlite_utils.Database, q: str, limit: int = 5) -> list[str]:
    """Queries one edit away from ``q``: its single out-of-vocabulary word corrected."""
    tokens = q.split()
    unknown = [i for i, t in enumerate(tokens)
               if not db.execute("SELECT 1 FROM words WHERE word = ?", [t]).fetchone()]
    if len(unknown) != 1 or len(tokens[unknown[0]]) < 4 or tokens[unknown[0]].isdigit():
        return []
    i = unknown[0]
    word = tokens[i]
    keys = sorted(deletions(word) | {word})
    found = db.execute(
        f"SELECT DISTINCT d.word, w.freq FROM word_deletes d JOIN words w ON w.word = d.word "
        f"WHERE d.del IN ({', '.join('?' for _ in keys)})",
        keys,
    ).fetchall()
    good = sorted((f for f in found if within_one_edit(word, f[0])), key=lambda f: (-f[1], f[0]))
    return [" ".join(tokens[:i] + [w] + tokens[i + 1:]) for w, _ in good[:limit]]


def search(db: sqlite_utils.Database, term: str, max_results: int = 5) -> list[dict]:
    """Ranked candidate concepts for a free-text term (see the module docstring for scores)."""
    q = norm(term or "")
    if not q:
        raise InvalidQuery("the search term is empty")
    hits: dict[str, tuple[float, tuple, str]] = {}
    _exact(db, q, hits, 1.0, 0.9, fuzzy=False)
    if len(hits) < max_results:
        _words(db, q, hits, 0.5, 0.3, fuzzy=False)
    if len(hits) < max_results:
        for corrected in corrections(db, q):
            _exact(db, corrected, hits, 0.45, 0.4, fuzzy=True)
            _words(db, corrected, hits, 0.2, 0.15, fuzzy=True)
    if not hits:
        raise NoMatch(term)
    placeholders = ", ".join("?" for _ in hits)
    info = {row[0]: row for row in db.execute(
        f"SELECT cui, name, snomed_code, rxnorm, loinc, atom_count FROM concepts WHERE cui IN ({placeholders})",
        list(hits),
    ).fetchall()}
    ranked = sorted(hits, key=lambda c: (-hits[c][0], -info[c][5], len(info[c][1]), c))[:max_results]
    out = []
    for cui in ranked:
        score, (text, sab, tty), match_type = hits[cui]
        _, name, snomed, rxnorm, loinc, _n = info[cui]
        types = _semtypes(db, cui)
        out.append({
            "cui": cui, "name": name, "snomed_code": snomed, "rxnorm": rxnorm, "loinc": loinc,
            "semantic_type": types[0]["name"] if types else None, "tui": types[0]["tui"] if types else None,
            "source": sab, "matched_term": text, "term_type": tty, "match_type": match_type, "score": score,
        })
    return out


def check_cui(cui: str) -> str:
    cui = (cui or "").strip().upper()
    if not CUI_RE.match(cui):
        raise InvalidQuery("a CUI is the letter C followed by seven digits, for example C0020538")
    return cui


def get_concept(db: sqlite_utils.Database, cui: str) -> dict:
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
        "cui": cui, "name": name, "semantic_types": _semtypes(db, cui),
        "codes": {"snomed_code": snomed, "rxnorm": rxnorm, "loinc": loinc},
        "synonyms": synonyms,
    }


def semantic_types(db: sqlite_utils.Database, cui: str) -> dict:
    cui = check_cui(cui)
    row = db.execute("SELECT name FROM concepts WHERE cui = ?", [cui]).fetchone()
    if row is None:
        raise ConceptNotFound(cui)
    types = _semtypes(db, cui)
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
