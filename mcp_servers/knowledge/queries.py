"""Read-side queries over the knowledge store; each returns JSON-able dicts for the server.

Invariants:
- Pure reads on a caller-supplied (query_only) connection; nothing here writes.
- An unknown drug is always reported as such (``DrugNotFound``), never as "no warning" or
  "no interaction". A name that maps to several generics raises ``AmbiguousDrugName``.
- Interaction checks cover every unordered pair of distinct recognised drugs; "no known
  interaction" is only ever said about drugs that are in the database, and unrecognised names
  come with the caveat that their absence does not mean the combination is safe.
- Full-text ranking uses FTS5 bm25 over rows matching every query term; only when no row
  does are rows matching some of the terms returned (still ranked by bm25). Long texts are clipped for the model, never silently dropped
  (the result says when it clipped).
- Trials are ``knowledge.trials``' (the search with ClinicalTrials.gov's parameters, details).
"""

from __future__ import annotations

import itertools
import json
import re

import sqlite_utils

from mcp_servers.contracts import drugs_not_found_text
from mcp_servers.knowledge.names import lookup_keys
from mcp_servers.knowledge.store import AmbiguousDrugName, DrugNotFound, RecordNotFound
from mcp_servers.knowledge.writes import SEVERITIES

MAX_TEXT = 1500
MAX_LIST_ITEMS = 12

_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it me of on or show tell the this "
    "to what which with about any find latest recent new evidence study studies trial trials "
    "research paper papers article articles literature publication publications review reviews "
    "patient patients there clinical".split()
)
# Common clinical abbreviations, expanded as an alternative phrase (not a replacement).
_ABBREVIATIONS = {
    "afib": "atrial fibrillation", "af": "atrial fibrillation", "t2dm": "type 2 diabetes",
    "t2d": "type 2 diabetes", "t1dm": "type 1 diabetes", "t1d": "type 1 diabetes", "dm": "diabetes",
    "htn": "hypertension", "ckd": "chronic kidney disease", "hf": "heart failure",
    "chf": "heart failure", "hfref": "heart failure reduced ejection fraction",
    "mi": "myocardial infarction", "acs": "acute coronary syndrome", "cad": "coronary artery disease",
    "copd": "chronic obstructive pulmonary disease", "mdd": "major depressive disorder",
    "gdm": "gestational diabetes", "bp": "blood pressure", "mpm": "malignant pleural mesothelioma",
    "nsclc": "non small cell lung cancer", "vte": "venous thromboembolism", "dvt": "deep vein thrombosis",
    "pe": "pulmonary embolism", "ra": "rheumatoid arthritis", "ssri": "serotonin reuptake inhibitor",
    "nsaid": "anti inflammatory", "nsaids": "anti inflammatory", "doac": "oral anticoagulant",
}


# -- helpers ---------------------------------------------------------------------------------
def _clip(text: str | None, limit: int = MAX_TEXT) -> tuple[str | None, bool]:
    if text is None or len(text) <= limit:
        return text, False
    return text[:limit].rsplit(" ", 1)[0] + " ... (clipped)", True


def _clip_list(items: list[str]) -> tuple[list[str], bool]:
    clipped_any = len(items) > MAX_LIST_ITEMS
    out = []
    for item in items[:MAX_LIST_ITEMS]:
        text, clipped = _clip(item, MAX_TEXT // 2)
        clipped_any |= clipped
        out.append(text)
    return out, clipped_any


def _fts_groups(text: str) -> list[str]:
    tokens = re.findall(r"[a-z0-9]+", text.lower())
    kept = [t for t in tokens if t not in _STOPWORDS] or tokens
    groups, seen = [], set()
    for token in kept:
        if token in seen:
            continue
        seen.add(token)
        alternatives = [f'"{token}"']
        if token in _ABBREVIATIONS:
            alternatives.append(f'"{_ABBREVIATIONS[token]}"')
        groups.append(alternatives[0] if len(alternatives) == 1 else "(" + " OR ".join(alternatives) + ")")
    return groups


def _ranked(db: sqlite_utils.Database, sql: str, text: str, params: list, limit: int) -> list[dict]:
    """Run an FTS query for rows matching every term; only if none do, rows matching any term."""
    groups = _fts_groups(text)
    if not groups:
        return []
    rows = list(db.query(sql, [" AND ".join(groups), *params, limit]))
    if not rows and len(groups) > 1:
        rows = list(db.query(sql, [" OR ".join(groups), *params, limit]))
    return rows


# -- drugs -----------------------------------------------------------------------------------
def resolve_drug(db: sqlite_utils.Database, name: str) -> str:
    """The generic name for a generic, brand or synonym name; raises if unknown or ambiguous."""
    for key in lookup_keys(name):
        rows = db.execute("SELECT DISTINCT generic_name, kind FROM drug_names WHERE name_key = ?", [key]).fetchall()
        generics = sorted({r[0] for r in rows})
        if len(generics) == 1:
            return generics[0]
        if generics:
            exact = sorted({r[0] for r in rows if r[1] == "generic"})
            if len(exact) == 1:
                return exact[0]
            raise AmbiguousDrugName(name, generics)
    raise DrugNotFound([name])


def _drug_row(db: sqlite_utils.Database, generic: str) -> dict:
    return next(db.query("SELECT * FROM drugs WHERE generic_name = ?", [generic]))


def drug_safety(db: sqlite_utils.Database, drug_name: str) -> dict:
    generic = resolve_drug(db, drug_name)
    row = _drug_row(db, generic)
    boxed, clipped_boxed = _clip(row["boxed_warning"])
    contraindications, clipped_c = _clip_list(json.loads(row["contraindications"]))
    warnings, clipped_w = _clip_list(json.loads(row["major_warnings"]))
    return {
        "drug": generic,
        "matched_name": drug_name,
        "brand_names": json.loads(row["brand_names"]),
        "drug_class": row["drug_class"],
        "has_boxed_warning": boxed is not None,
        "boxed_warning": boxed,
        "contraindications": contraindications,
        "major_warnings": warnings,
        "clipped": clipped_boxed or clipped_c or clipped_w,
        "source": row["source"],
        # the label's effective date when an import gave one; the row's last load otherwise
        "label_date": row["effective_time"],
        "updated_at": row["updated_at"],
        "demo_content": bool(row["demo"]),
    }


def _names_of(db: sqlite_utils.Database, generic: str) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM drug_names WHERE generic_name = ?", [generic])]


def _label_mentions(db: sqlite_utils.Database, a: str, b: str) -> list[dict]:
    """Sentences of one drug's label interaction section that name the other drug."""
    found = []
    for label_of, other in ((a, b), (b, a)):
        text = db.execute("SELECT label_interactions FROM drugs WHERE generic_name = ?", [label_of]).fetchone()[0]
        if not text:
            continue
        names = sorted(_names_of(db, other), key=len, reverse=True)
        pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b", re.IGNORECASE)
        for sentence in re.split(r"(?<=[.;])\s+", text):
            if pattern.search(sentence):
                excerpt, _ = _clip(sentence.strip(), 400)
                found.append({"drugs": [a, b], "label_of": label_of, "excerpt": excerpt})
                break
    return found


def check_interactions(db: sqlite_utils.Database, drug_names: list[str]) -> dict:
    recognised: list[tuple[str, str]] = []  # (input name, generic), in input order
    unknown: list[str] = []
    ambiguous: dict[str, list[str]] = {}
    for name in drug_names:
        try:
            recognised.append((name, resolve_drug(db, name)))
        except DrugNotFound:
            unknown.append(name)
        except AmbiguousDrugName as exc:
            ambiguous[name] = exc.candidates
    if len(recognised) < 2:
        if ambiguous and not unknown:
            first = next(iter(ambiguous))
            raise AmbiguousDrugName(first, ambiguous[first])
        raise DrugNotFound(unknown + list(ambiguous))
    generics = sorted({g for _n, g in recognised})
    same_drug = [
        [n for n, g in recognised if g == generic]
        for generic in generics
        if sum(1 for _n, g in recognised if g == generic) > 1
    ]
    interactions, mentions = [], []
    pairs = list(itertools.combinations(generics, 2))
    for a, b in pairs:
        row = next(db.query("SELECT * FROM interactions WHERE drug_a = ? AND drug_b = ?", [a, b]), None)
        if row:
            interactions.append({
                "drugs": [a, b], "severity": row["severity"], "mechanism": row["mechanism"],
                "management": row["management"], "source": row["source"], "updated_at": row["updated_at"],
                "demo_content": bool(row["demo"]),
            })
        else:
            mentions += _label_mentions(db, a, b)
    interactions.sort(key=lambda i: SEVERITIES.index(i["severity"]))
    return {
        "drugs_checked": [{"name": n, "generic_name": g} for n, g in recognised],
        "not_recognised": unknown,
        # Said with the names, so a reader of the result cannot take their absence for safety.
        "not_recognised_note": drugs_not_found_text("check_drug_interactions", unknown) if unknown else "",
        "ambiguous": ambiguous,
        "same_drug_given_twice": same_drug,
        "pairs_checked": len(pairs),
        "interactions": interactions,
        "label_mentions": mentions,
        "note": (
            "No known interaction among the recognised drugs in the local database."
            if not interactions and not mentions and pairs else
            "Interactions are listed most severe first." if interactions else ""
        ),
    }


def vocabulary(db: sqlite_utils.Database) -> list[str]:
    """Every generic, brand and synonym name that resolves to exactly one drug, sorted."""
    rows = db.execute(
        "SELECT name_key, MIN(name), COUNT(DISTINCT generic_name) FROM drug_names GROUP BY name_key"
    ).fetchall()
    return sorted((name for _key, name, count in rows if count == 1), key=lambda n: (n.lower(), n))


# -- literature ------------------------------------------------------------------------------
_ARTICLE_SQL = (
    "SELECT a.pmid, a.title, a.journal, a.year, a.demo, a.abstract, "
    "snippet(articles_fts, 2, '', '', ' ... ', 40) AS snippet, bm25(articles_fts, 5.0, 3.0, 1.0) AS score "
    "FROM articles_fts JOIN articles a ON a.rowid = articles_fts.rowid "
    "WHERE articles_fts MATCH ? ORDER BY score LIMIT ?"
)


def search_literature(db: sqlite_utils.Database, query: str, limit: int = 8) -> dict:
    rows = _ranked(db, _ARTICLE_SQL, query, [], limit)
    if not rows:
        total = db["articles"].count
        raise RecordNotFound(f"no articles in the local library ({total} articles) match '{query}'")
    return {
        "query": query,
        "count": len(rows),
        "articles": [
            {
                "pmid": r["pmid"], "title": r["title"], "journal": r["journal"], "year": r["year"],
                "snippet": r["snippet"] or _clip(r["abstract"], 300)[0],
                "demo_paraphrase": bool(r["demo"]),
            }
            for r in rows
        ],
    }


__all__ = ["check_interactions", "drug_safety", "resolve_drug", "search_literature", "vocabulary"]
