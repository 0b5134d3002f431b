"""Concept search: ranked candidate concepts for a free-text clinical term.

``search(db_or_path, term, max_results)`` is the whole interface: pass an open connection when
calling it many times (the grounding loop), or a database path for a one-off call.

Invariants:
- Pure reads (a path is opened query-only and closed again); nothing here writes.
- Indexes used, all built by ``umls.store.finalize``: ``atoms.norm`` (exact lookup of a
  normalised name), FTS5 ``atoms_fts`` over ``norm`` (word and prefix matches), and the word
  deletion neighbourhood ``word_deletes`` (every vocabulary word of 4-24 characters stored
  under itself and under each string obtained by deleting one character; 3-character words
  under themselves). A query word that is not in the vocabulary is looked up under itself and
  its own one-character deletions; candidates are confirmed with an optimal-string-alignment
  distance of at most 1, so exactly one insertion, deletion, substitution or adjacent
  transposition in one word is corrected. Its size grows with the vocabulary, not with the
  number of atoms.
- Scores mean one thing: 1.0 exact preferred name; 0.9 exact synonym / abbreviation / brand;
  0.5-0.875 word or prefix match (graded by how much of the matched name the query covers,
  plus 0.075 when the name begins with the query);
  0.45 / 0.4 exact name after a one-edit correction; 0.2-0.3875 word match after a correction
  (the same grading, on half the span).
- Ties are broken by the number of names a concept has (more first), then the shorter
  preferred name, then the CUI, so a ranking never depends on row order.
"""

from __future__ import annotations

from pathlib import Path

import sqlite_utils

from mcp_servers.umls.foundation import InvalidQuery, NoMatch, connect, deletions, norm
from mcp_servers.umls.lookup import concept_types

MAX_TERM_CHARS = 200
_WORD_ROWS = 300  # FTS matches scored per query (shortest names first)


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


def search(db: sqlite_utils.Database | Path | str, term: str, max_results: int = 5) -> list[dict]:
    """Ranked candidate concepts for a free-text term, best first (scores: module docstring).

    ``db`` is an open connection, or the path of a database to open query-only for this call.
    Raises ``InvalidQuery`` for an empty term and ``NoMatch`` when nothing matches.
    """
    if not isinstance(db, sqlite_utils.Database):
        conn = connect(db, read_only=True)
        try:
            return search(conn, term, max_results)
        finally:
            conn.close()
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
        types = concept_types(db, cui)
        out.append({
            "cui": cui, "name": name, "snomed_code": snomed, "rxnorm": rxnorm, "loinc": loinc,
            "semantic_type": types[0]["name"] if types else None, "tui": types[0]["tui"] if types else None,
            "source": sab, "matched_term": text, "term_type": tty, "match_type": match_type, "score": score,
        })
    return out
