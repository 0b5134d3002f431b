"""The knowledge store's shipped starter content (``data/``): drugs, interactions,
articles and trials written or sampled for the appliance, marked ``demo``.

Invariants:
- Loading never overwrites an imported row (origin ``import``); starter rows no longer in the
  shipped files are deleted, imported rows are kept.
- ``starter_hash`` covers the migration names and every shipped file, so ``ensure_database``
  reloads exactly when either changes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import sqlite_utils

from mcp_servers.knowledge.schema import MIGRATIONS
from mcp_servers.knowledge.writes import origin_of, upsert_article, upsert_drug, upsert_interaction, upsert_trial

DATA_DIR = Path(__file__).resolve().parent / "data"
STARTER_FILES = ("drugs.json", "interactions.json", "articles.json", "trials_demo.json", "trials_ctgov_sample.json")


def starter_hash() -> str:
    digest = hashlib.sha256(",".join(m.__name__ for m in MIGRATIONS).encode())
    for name in STARTER_FILES:
        digest.update(name.encode())
        digest.update((DATA_DIR / name).read_bytes())
    return digest.hexdigest()


def _load(name: str) -> dict:
    return json.loads((DATA_DIR / name).read_text(encoding="utf-8"))


def _starter_drugs() -> list[dict]:
    data = _load("drugs.json")
    drugs = []
    for entry in data["drugs"]:
        source = (
            f"Demo summary written for this appliance from the US FDA prescribing information "
            f"({entry['label_basis']}); paraphrased, not the label text; verify against the current label."
        )
        drugs.append({**entry, "source": source, "demo": True, "source_id": "demo"})
    return drugs


def _starter_interactions() -> list[tuple[str, str, dict]]:
    data = _load("interactions.json")
    source = (
        "Demo summary written for this appliance from the US FDA prescribing information of the drugs "
        "involved; paraphrased; verify against current labeling."
    )
    pairs = []
    for entry in data["interactions"]:
        for a in entry["a"]:
            for b in entry["b"]:
                fields = {k: entry[k] for k in ("severity", "mechanism", "management")}
                pairs.append((a, b, {**fields, "source": source, "demo": True}))
    return pairs


def _starter_articles() -> list[dict]:
    note = (
        "Citation details from PubMed; abstract text is a demo paraphrase written for this appliance, "
        "not the published abstract."
    )
    return [{**a, "source": note, "demo": True} for a in _load("articles.json")["articles"]]


def _starter_trials() -> list[dict]:
    trials = []
    for name in ("trials_demo.json", "trials_ctgov_sample.json"):
        data = _load(name)
        trials += [{**t, "source": data["source"], "demo": data["demo"]} for t in data["trials"]]
    return trials


def load_starter_content(db: sqlite_utils.Database) -> dict[str, int]:
    """Upsert the shipped records (never over imported rows) and drop stale starter rows."""
    counts = {"drugs": 0, "interactions": 0, "articles": 0, "trials": 0}
    drugs = _starter_drugs()
    known = set()
    for drug in drugs:
        known.add(drug["generic_name"])
        if origin_of(db, "drugs", "generic_name = ?", [drug["generic_name"]]) != "import":
            upsert_drug(db, drug, "starter")
        counts["drugs"] += 1
    pairs = set()
    for a, b, fields in _starter_interactions():
        missing = {a, b} - known
        if missing:
            raise ValueError(f"interaction names unknown drug(s): {sorted(missing)}")
        pairs.add(tuple(sorted((a, b))))
        if origin_of(db, "interactions", "drug_a = ? AND drug_b = ?", sorted((a, b))) != "import":
            upsert_interaction(db, a, b, fields, "starter")
        counts["interactions"] += 1
    pmids = set()
    for article in _starter_articles():
        pmids.add(article["pmid"])
        if origin_of(db, "articles", "pmid = ?", [article["pmid"]]) != "import":
            upsert_article(db, article, "starter")
        counts["articles"] += 1
    ncts = set()
    for trial in _starter_trials():
        ncts.add(trial["nct_id"])
        if origin_of(db, "trials", "nct_id = ?", [trial["nct_id"]]) != "import":
            upsert_trial(db, trial, "starter")
        counts["trials"] += 1
    # Shipped records removed from the files are removed from the database (imports are kept).
    for generic in {r[0] for r in db.execute("SELECT generic_name FROM drugs WHERE origin = 'starter'")} - known:
        db.execute("DELETE FROM drugs WHERE generic_name = ?", [generic])
        db.execute("DELETE FROM drug_names WHERE generic_name = ?", [generic])
    for a, b in {tuple(r) for r in db.execute("SELECT drug_a, drug_b FROM interactions WHERE origin = 'starter'")} - pairs:
        db.execute("DELETE FROM interactions WHERE drug_a = ? AND drug_b = ?", [a, b])
    for (pmid,) in {tuple(r) for r in db.execute("SELECT pmid FROM articles WHERE origin = 'starter'")} - {(p,) for p in pmids}:
        db.execute("DELETE FROM articles WHERE pmid = ?", [pmid])
    for (nct,) in {tuple(r) for r in db.execute("SELECT nct_id FROM trials WHERE origin = 'starter'")} - {(n,) for n in ncts}:
        db.execute("DELETE FROM trials WHERE nct_id = ?", [nct])
    return counts
