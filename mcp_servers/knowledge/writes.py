"""Writes to the knowledge store: one upsert per kind of record, inside the caller's transaction
(the importers' run, ``knowledge.starter``'s load), and the reads they need.

Invariants:
- Every upsert returns ``inserted``, ``updated`` or ``unchanged`` and writes plain SQL, so the
  caller's transaction decides when to commit.
- ``upsert_drug`` rebuilds the drug's ``drug_names`` rows (``knowledge.names`` keys); an
  interaction is stored once per unordered pair (``drug_a < drug_b``); a trial's ages in years
  are computed from ClinicalTrials.gov's text (``trial_criteria.age_years``).
"""

from __future__ import annotations

import json
from typing import Any

import sqlite_utils

from common.sqlite import now_iso
from mcp_servers.knowledge.names import lookup_keys, name_key
from mcp_servers.knowledge.trial_criteria import age_years

SEVERITIES = ("contraindicated", "major", "moderate", "minor")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _write(db: sqlite_utils.Database, table: str, pks: tuple[str, ...], row: dict) -> str:
    """Insert or update one row; return 'inserted', 'updated' or 'unchanged'."""
    where = " AND ".join(f"[{k}] = ?" for k in pks)
    cursor = db.execute(f"SELECT * FROM [{table}] WHERE {where}", [row[k] for k in pks])
    existing = cursor.fetchone()
    # Plain SQL (not Table.insert/update) so the caller's transaction decides when to commit.
    values = {**row, "updated_at": now_iso()}
    if existing is None:
        columns = ", ".join(f"[{k}]" for k in values)
        db.execute(f"INSERT INTO [{table}] ({columns}) VALUES ({', '.join('?' for _ in values)})", list(values.values()))
        return "inserted"
    current = dict(zip([d[0] for d in cursor.description], existing))
    if all(current.get(k) == v for k, v in row.items()):
        return "unchanged"
    assignments = ", ".join(f"[{k}] = ?" for k in values)
    db.execute(f"UPDATE [{table}] SET {assignments} WHERE {where}", [*values.values(), *[row[k] for k in pks]])
    return "updated"


def get_drug(db: sqlite_utils.Database, generic_name: str) -> dict | None:
    rows = list(db.query("SELECT * FROM drugs WHERE generic_name = ?", [generic_name]))
    return rows[0] if rows else None


def generic_for(db: sqlite_utils.Database, name: str) -> str | None:
    """The generic an existing generic or synonym name belongs to (brands do not count here)."""
    for key in lookup_keys(name):
        rows = db.execute(
            "SELECT DISTINCT generic_name FROM drug_names WHERE name_key = ? AND kind IN ('generic', 'synonym')", [key]
        ).fetchall()
        if len(rows) == 1:
            return rows[0][0]
    return None


def _unique(names: list[str] | None) -> list[str]:
    """Names deduplicated by lookup key, keeping the first spelling seen."""
    out, keys = [], set()
    for name in names or []:
        key = name_key(name)
        if key and key not in keys:
            keys.add(key)
            out.append(" ".join(name.split()))
    return out


def upsert_drug(db: sqlite_utils.Database, drug: dict, origin: str) -> str:
    """Write one drug and rebuild its names. ``drug`` uses the column names; lists stay lists."""
    generic = drug["generic_name"]
    brands, synonyms = _unique(drug.get("brand_names")), _unique(drug.get("synonyms"))
    row = {
        "generic_name": generic,
        "brand_names": _dumps(sorted(brands, key=str.lower)),
        "synonyms": _dumps(sorted(synonyms, key=str.lower)),
        "drug_class": drug.get("drug_class"),
        "boxed_warning": drug.get("boxed_warning") or None,
        "contraindications": _dumps(drug.get("contraindications") or []),
        "major_warnings": _dumps(drug.get("major_warnings") or []),
        "label_interactions": drug.get("label_interactions") or None,
        "source": drug["source"],
        "source_id": drug.get("source_id"),
        "product_type": drug.get("product_type"),
        "effective_time": drug.get("effective_time"),
        "demo": int(bool(drug.get("demo"))),
        "origin": origin,
    }
    status = _write(db, "drugs", ("generic_name",), row)
    names = [(generic, "generic")] + [(b, "brand") for b in brands] + [(s, "synonym") for s in synonyms]
    db.execute("DELETE FROM drug_names WHERE generic_name = ?", [generic])
    seen = set()
    for name, kind in names:
        key = name_key(name)
        if key and key not in seen:
            seen.add(key)
            db.execute(
                "INSERT INTO drug_names (name_key, name, generic_name, kind) VALUES (?, ?, ?, ?)",
                [key, " ".join(name.split()), generic, kind],
            )
    return status


def upsert_interaction(db: sqlite_utils.Database, a: str, b: str, fields: dict, origin: str) -> str:
    if fields["severity"] not in SEVERITIES:
        raise ValueError(f"unknown severity {fields['severity']!r}")
    drug_a, drug_b = sorted((a, b))
    row = {
        "drug_a": drug_a, "drug_b": drug_b, "severity": fields["severity"], "mechanism": fields["mechanism"],
        "management": fields["management"], "source": fields["source"], "demo": int(bool(fields.get("demo"))),
        "origin": origin,
    }
    return _write(db, "interactions", ("drug_a", "drug_b"), row)


def upsert_article(db: sqlite_utils.Database, article: dict, origin: str) -> str:
    row = {
        "pmid": str(article["pmid"]), "title": article["title"], "journal": article.get("journal"),
        "year": article.get("year"), "abstract": article.get("abstract"), "keywords": article.get("keywords"),
        "source": article["source"], "demo": int(bool(article.get("demo"))), "origin": origin,
    }
    return _write(db, "articles", ("pmid",), row)


def upsert_trial(db: sqlite_utils.Database, trial: dict, origin: str) -> str:
    row = {
        "nct_id": trial["nct_id"], "title": trial["title"], "status": trial.get("status"),
        "phases": _dumps(trial.get("phases") or []), "study_type": trial.get("study_type"),
        "conditions": _dumps(trial.get("conditions") or []), "keywords": _dumps(trial.get("keywords") or []),
        "interventions": _dumps(trial.get("interventions") or []), "locations": _dumps(trial.get("locations") or []),
        "eligibility_criteria": trial.get("eligibility_criteria"), "minimum_age": trial.get("minimum_age"),
        "maximum_age": trial.get("maximum_age"), "sex": trial.get("sex"), "last_update": trial.get("last_update"),
        "source": trial["source"], "demo": int(bool(trial.get("demo"))), "origin": origin,
        "min_age_years": age_years(trial.get("minimum_age")), "max_age_years": age_years(trial.get("maximum_age")),
        "arms": _dumps(trial.get("arms") or []),
    }
    return _write(db, "trials", ("nct_id",), row)


def origin_of(db: sqlite_utils.Database, table: str, where: str, params: list) -> str | None:
    row = db.execute(f"SELECT origin FROM [{table}] WHERE {where}", params).fetchone()
    return row[0] if row else None
