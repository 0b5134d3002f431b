"""The clinical-knowledge store: schema, migrations, writes and the shipped starter content.

Invariants:
- One SQLite file (``knowledge.sqlite``) opened through ``common.sqlite`` (WAL, busy timeout,
  integrity check at the first writable open: builders check it, readers do not). Connections
  are per call (tools may run in worker threads); read connections are ``query_only``.
  Commits are not fsynced one by one (``durable=False``):
  the content is rebuilt from the shipped and imported files.
- Schema changes are named, append-only migration functions recorded under the migration set
  ``knowledge``.
- Drugs are keyed by a canonical generic name (lower case, salt words removed: "warfarin sodium"
  -> "warfarin"). ``drug_names`` maps every generic, brand and synonym key to its generic; a
  brand key may map to several generics (then it is ambiguous, never silently resolved).
- Interactions are stored once per unordered pair: ``drug_a < drug_b``.
- Trials carry their ages in years beside ClinicalTrials.gov's text (``min_age_years``,
  ``max_age_years``; NULL means no limit), computed by ``upsert_trial`` from that text, and two
  full-text indexes kept by triggers: ``trials_fts`` (title, conditions, keywords, interventions)
  and ``trials_eligibility_fts`` (the eligibility criteria text); ``trial_filters`` is a narrow
  copy of the filtered columns (same rowid), kept by triggers too.
- Rows carry ``origin``: ``starter`` (shipped files under ``data/knowledge``) or ``import``
  (openFDA / MEDLINE / ClinicalTrials.gov importers). Loading the starter content never
  overwrites an imported row; imports always win over starter rows.
- ``ensure_database`` is idempotent: a second call with unchanged shipped files only checks the
  migrations and a content hash, and changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Any, Callable

import sqlite_utils

from common import sqlite
from common.sqlite import get_meta, now_iso, set_meta, write_transaction
from mcp_servers.trial_criteria import age_years

DATA_DIR = Path(__file__).resolve().parent / "data" / "knowledge"
STARTER_FILES = ("drugs.json", "interactions.json", "articles.json", "trials_demo.json", "trials_ctgov_sample.json")
SEVERITIES = ("contraindicated", "major", "moderate", "minor")

Progress = Callable[[str], None] | None


class KnowledgeError(Exception):
    """Base class of the knowledge store's expected failures."""


class DrugNotFound(KnowledgeError):
    """One or more drug names are not in the database."""

    def __init__(self, names: list[str]):
        super().__init__(", ".join(names))
        self.names = names


class AmbiguousDrugName(KnowledgeError):
    """A name (usually a brand) maps to more than one generic drug."""

    def __init__(self, name: str, candidates: list[str]):
        super().__init__(f"{name}: {', '.join(candidates)}")
        self.name = name
        self.candidates = candidates


class RecordNotFound(KnowledgeError):
    """No article or trial matches the request."""


# -- migrations ------------------------------------------------------------------------------
def m001_initial(db: sqlite_utils.Database) -> None:
    db["drugs"].create(
        {
            "generic_name": str, "brand_names": str, "synonyms": str, "drug_class": str,
            "boxed_warning": str, "contraindications": str, "major_warnings": str,
            "label_interactions": str, "source": str, "source_id": str, "product_type": str,
            "effective_time": str, "demo": int, "origin": str, "updated_at": str,
        },
        pk="generic_name", not_null=["origin"],
    )
    db["drug_names"].create(
        {"name_key": str, "name": str, "generic_name": str, "kind": str}, pk=("name_key", "generic_name")
    )
    db["drug_names"].create_index(["generic_name"])
    db["interactions"].create(
        {
            "drug_a": str, "drug_b": str, "severity": str, "mechanism": str, "management": str,
            "source": str, "demo": int, "origin": str, "updated_at": str,
        },
        pk=("drug_a", "drug_b"),
    )
    db["articles"].create(
        {
            "pmid": str, "title": str, "journal": str, "year": int, "abstract": str, "keywords": str,
            "source": str, "demo": int, "origin": str, "updated_at": str,
        },
        pk="pmid",
    )
    db["articles"].enable_fts(["title", "keywords", "abstract"], create_triggers=True, tokenize="porter")
    db["trials"].create(
        {
            "nct_id": str, "title": str, "status": str, "phases": str, "study_type": str,
            "conditions": str, "keywords": str, "interventions": str, "locations": str,
            "eligibility_criteria": str, "minimum_age": str, "maximum_age": str, "sex": str,
            "last_update": str, "source": str, "demo": int, "origin": str, "updated_at": str,
        },
        pk="nct_id",
    )
    db["trials"].enable_fts(["title", "conditions", "keywords", "interventions"], create_triggers=True, tokenize="porter")
    db["meta"].create({"key": str, "value": str}, pk="key")


def m002_trial_search(db: sqlite_utils.Database) -> None:
    """What a prescreen search filters on: ages in years (NULL: no limit), the arm groups, and a
    full-text index of the eligibility criteria (external content, kept by triggers)."""
    for column, kind in (("min_age_years", float), ("max_age_years", float), ("arms", str)):
        db["trials"].add_column(column, kind)
    for nct_id, minimum, maximum in db.execute("SELECT nct_id, minimum_age, maximum_age FROM trials").fetchall():
        db.execute("UPDATE trials SET min_age_years = ?, max_age_years = ? WHERE nct_id = ?",
                   [age_years(minimum), age_years(maximum), nct_id])
    db.execute(
        "CREATE VIRTUAL TABLE [trials_eligibility_fts] USING FTS5 "
        "([eligibility_criteria], tokenize='porter', content=[trials])"
    )
    db.execute(
        "CREATE TRIGGER [trials_eligibility_ai] AFTER INSERT ON [trials] BEGIN "
        "INSERT INTO [trials_eligibility_fts] (rowid, [eligibility_criteria]) VALUES (new.rowid, new.[eligibility_criteria]); END"
    )
    db.execute(
        "CREATE TRIGGER [trials_eligibility_ad] AFTER DELETE ON [trials] BEGIN "
        "INSERT INTO [trials_eligibility_fts] ([trials_eligibility_fts], rowid, [eligibility_criteria]) "
        "VALUES('delete', old.rowid, old.[eligibility_criteria]); END"
    )
    db.execute(
        "CREATE TRIGGER [trials_eligibility_au] AFTER UPDATE OF [eligibility_criteria] ON [trials] BEGIN "
        "INSERT INTO [trials_eligibility_fts] ([trials_eligibility_fts], rowid, [eligibility_criteria]) "
        "VALUES('delete', old.rowid, old.[eligibility_criteria]); "
        "INSERT INTO [trials_eligibility_fts] (rowid, [eligibility_criteria]) VALUES (new.rowid, new.[eligibility_criteria]); END"
    )
    db.execute("INSERT INTO [trials_eligibility_fts] ([trials_eligibility_fts]) VALUES ('rebuild')")


_FILTER_COLUMNS = ("status", "phases", "sex", "min_age_years", "max_age_years", "study_type")


def m003_trial_filters(db: sqlite_utils.Database) -> None:
    """A narrow copy of the columns a trial search filters on, one row per trial (same rowid),
    kept by triggers: filtering tens of thousands of full-text matches then reads small rows,
    not trial rows that carry their whole eligibility text."""
    db.execute(
        "CREATE TABLE [trial_filters] ([rowid] INTEGER PRIMARY KEY, [status] TEXT, [phases] TEXT, [sex] TEXT, "
        "[min_age_years] FLOAT, [max_age_years] FLOAT, [study_type] TEXT)"
    )
    columns = ", ".join(f"[{c}]" for c in _FILTER_COLUMNS)
    values = ", ".join("upper(new.[sex])" if c == "sex" else f"new.[{c}]" for c in _FILTER_COLUMNS)
    db.execute(f"CREATE TRIGGER [trial_filters_ai] AFTER INSERT ON [trials] BEGIN "
               f"INSERT INTO [trial_filters] (rowid, {columns}) VALUES (new.rowid, {values}); END")
    db.execute(f"CREATE TRIGGER [trial_filters_au] AFTER UPDATE ON [trials] BEGIN "
               f"DELETE FROM [trial_filters] WHERE rowid = old.rowid; "
               f"INSERT INTO [trial_filters] (rowid, {columns}) VALUES (new.rowid, {values}); END")
    db.execute("CREATE TRIGGER [trial_filters_ad] AFTER DELETE ON [trials] BEGIN "
               "DELETE FROM [trial_filters] WHERE rowid = old.rowid; END")
    db.execute(f"INSERT INTO [trial_filters] (rowid, {columns}) SELECT rowid, "
               + ", ".join("upper([sex])" if c == "sex" else f"[{c}]" for c in _FILTER_COLUMNS) + " FROM [trials]")


STORE = "knowledge"  # the migration set's name
MIGRATIONS: tuple[sqlite.Migration, ...] = (m001_initial, m002_trial_search, m003_trial_filters)


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations in order; return the names applied."""
    return sqlite.migrate(db, STORE, MIGRATIONS)


def connect(path: Path | str, read_only: bool = False) -> sqlite_utils.Database:
    """A connection of its own to the knowledge database at ``path``."""
    return sqlite.connect(path, read_only=read_only, durable=False)


# -- names -----------------------------------------------------------------------------------
_SALT_WORDS = frozenset(
    "hydrochloride hcl sodium potassium calcium magnesium besylate bisulfate maleate mesylate "
    "succinate tartrate bitartrate sulfate citrate acetate phosphate fumarate hyclate hydrobromide "
    "bromide monohydrate dihydrate trihydrate anhydrous disodium dipotassium".split()
)
_FORM_WORDS = frozenset(
    "tablet tablets tab tabs capsule capsules cap caps oral solution suspension injection "
    "syrup er xr sr dr cr ec ir la".split()
)


def name_key(name: str) -> str:
    """Lower-case, punctuation-free, single-spaced form used for every name lookup."""
    text = unicodedata.normalize("NFKC", name).lower()
    text = re.sub(r"[®™©]", "", text)
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def strip_salt(key: str) -> str:
    """'warfarin sodium' -> 'warfarin'; leaves names that are only salt words ('magnesium sulfate')."""
    words = key.split()
    while len(words) > 1 and words[-1] in _SALT_WORDS and not all(w in _SALT_WORDS for w in words[:-1]):
        words.pop()
    return " ".join(words)


def strip_dose(key: str) -> str:
    """'metformin 500 mg tablets' -> 'metformin': drop from the first number, then form words."""
    words = key.split()
    for i, word in enumerate(words):
        if i > 0 and word[0].isdigit():
            words = words[:i]
            break
    while len(words) > 1 and words[-1] in _FORM_WORDS:
        words.pop()
    return " ".join(words)


def lookup_keys(name: str) -> list[str]:
    """Candidate keys for a user-supplied drug name, most literal first."""
    key = name_key(name)
    keys = []
    for candidate in (key, strip_salt(key), strip_dose(key), strip_salt(strip_dose(key))):
        if candidate and candidate not in keys:
            keys.append(candidate)
    return keys


def display_name(name: str) -> str:
    """openFDA brand names are upper case ('TYLENOL'); show them as 'Tylenol', keep 'XR', 'IB'."""
    name = " ".join(name.split())
    if not name.isupper():
        return name
    def part(text: str) -> str:
        letters = re.sub(r"[^A-Z]", "", text)
        return text if len(letters) <= 2 or letters in {"ODT", "HCT"} else text.capitalize()

    return " ".join("-".join(part(p) for p in word.split("-")) for word in name.split(" "))


# -- writes ----------------------------------------------------------------------------------
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


# -- starter content -------------------------------------------------------------------------
def _starter_hash() -> str:
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


def ensure_database(path: Path, progress: Progress = None) -> None:
    """Create or migrate the knowledge database at ``path`` and load the shipped starter content.

    Idempotent: with unchanged shipped files a second call changes nothing.
    """
    say = progress or (lambda _msg: None)
    with sqlite.building(path, STORE, MIGRATIONS, say) as db:
        digest = _starter_hash()
        if get_meta(db, "starter_hash") == digest:
            say("starter content up to date")
            return
        with write_transaction(db):
            counts = load_starter_content(db)
            set_meta(db, "starter_hash", digest)
        say("starter content loaded: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
