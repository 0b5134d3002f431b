"""The knowledge store's shipped starter content (``data/``): drugs, interactions,
articles and trials written or sampled for the appliance, marked ``demo``.

Invariants:
- The drug and interaction tables are every ``drugs*.json`` and ``interactions*.json`` file in
  ``data/`` (``drug_files``, ``interaction_files``): ``drugs.json`` / ``interactions.json``
  first, the others in name order. A generic name held by two drug files (or twice by one) is
  an error naming both files, never a silent overwrite; an interaction naming a drug no drug
  file holds is an error too.
- Loading never overwrites an imported row (origin ``import``); starter rows no longer in the
  shipped files are deleted, imported rows are kept.
- ``starter_hash`` covers the migration names and every shipped file (names and bytes), so
  ``ensure_database`` reloads exactly when either changes, a file added or removed included.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import sqlite_utils

from mcp_servers.knowledge.migrations import MIGRATIONS
from mcp_servers.knowledge.writes import (
    origin_of,
    upsert_article,
    upsert_drug,
    upsert_interaction,
    upsert_trial,
)

DATA_DIR = Path(__file__).resolve().parent / "data"
TRIAL_FILES = ("trials_demo.json", "trials_ctgov_sample.json")
DRUG_SOURCE = (
    "Demo summary written for this appliance from the US FDA prescribing information ({label_basis}); "
    "paraphrased, not the label text; marked for pharmacist review; verify against the current label."
)
INTERACTION_SOURCE = (
    "Demo summary written for this appliance from the US FDA prescribing information of the drugs "
    "involved; paraphrased; marked for pharmacist review; verify against current labeling."
)


def _table_files(stem: str, data_dir: Path) -> tuple[str, ...]:
    """``{stem}.json`` first, then every other ``{stem}*.json`` in name order."""
    first = f"{stem}.json"
    others = sorted(p.name for p in data_dir.glob(f"{stem}*.json") if p.name != first)
    return ((first,) if (data_dir / first).is_file() else ()) + tuple(others)


def drug_files(data_dir: Path = DATA_DIR) -> tuple[str, ...]:
    """The shipped drug tables, in load order."""
    return _table_files("drugs", data_dir)


def interaction_files(data_dir: Path = DATA_DIR) -> tuple[str, ...]:
    """The shipped interaction tables, in load order."""
    return _table_files("interactions", data_dir)


def starter_files(data_dir: Path = DATA_DIR) -> tuple[str, ...]:
    """Every shipped file ``load_starter_content`` reads."""
    return drug_files(data_dir) + interaction_files(data_dir) + ("articles.json",) + TRIAL_FILES


def starter_hash(data_dir: Path = DATA_DIR) -> str:
    digest = hashlib.sha256(",".join(m.__name__ for m in MIGRATIONS).encode())
    for name in starter_files(data_dir):
        digest.update(name.encode())
        digest.update((data_dir / name).read_bytes())
    return digest.hexdigest()


def _load(name: str, data_dir: Path = DATA_DIR) -> dict:
    return json.loads((data_dir / name).read_text(encoding="utf-8"))


def starter_drugs(data_dir: Path = DATA_DIR) -> list[dict]:
    """Every shipped drug record with its provenance; raises ``ValueError`` for a generic name
    held twice, naming both files."""
    drugs: list[dict] = []
    held_by: dict[str, str] = {}
    for name in drug_files(data_dir):
        for entry in _load(name, data_dir)["drugs"]:
            generic = entry["generic_name"]
            if generic in held_by:
                raise ValueError(f"drug '{generic}' is in both {held_by[generic]} and {name}")
            held_by[generic] = name
            source = DRUG_SOURCE.format(label_basis=entry["label_basis"])
            drugs.append({**entry, "source": source, "demo": True, "source_id": "demo"})
    return drugs


def starter_interactions(data_dir: Path = DATA_DIR) -> list[tuple[str, str, dict]]:
    """Every shipped interaction pair (each entry expanded across its two groups)."""
    pairs = []
    for name in interaction_files(data_dir):
        for entry in _load(name, data_dir)["interactions"]:
            fields = {k: entry[k] for k in ("severity", "mechanism", "management")}
            for a in entry["a"]:
                for b in entry["b"]:
                    pairs.append((a, b, {**fields, "source": INTERACTION_SOURCE, "demo": True}))
    return pairs


def _starter_articles() -> list[dict]:
    note = (
        "Citation details from PubMed; abstract text is a demo paraphrase written for this appliance, "
        "not the published abstract."
    )
    return [{**a, "source": note, "demo": True} for a in _load("articles.json")["articles"]]


def _starter_trials() -> list[dict]:
    trials = []
    for name in TRIAL_FILES:
        data = _load(name)
        trials += [{**t, "source": data["source"], "demo": data["demo"]} for t in data["trials"]]
    return trials


def load_starter_content(db: sqlite_utils.Database, data_dir: Path = DATA_DIR) -> dict[str, int]:
    """Upsert the shipped records (never over imported rows) and drop stale starter rows.
    ``data_dir`` holds the drug and interaction tables (tests give a copy of their own)."""
    counts = {"drugs": 0, "interactions": 0, "articles": 0, "trials": 0}
    drugs = starter_drugs(data_dir)
    known = set()
    for drug in drugs:
        known.add(drug["generic_name"])
        if origin_of(db, "drugs", "generic_name = ?", [drug["generic_name"]]) != "import":
            upsert_drug(db, drug, "starter")
        counts["drugs"] += 1
    pairs = set()
    for a, b, fields in starter_interactions(data_dir):
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
