"""The knowledge store's schema: named, append-only migrations under the migration set
``knowledge`` (``common.sqlite``); ``knowledge.store`` states what the tables hold.

Invariant: a migration, once shipped, is never edited or reordered; a change is a new one.
"""

from __future__ import annotations

import sqlite_utils

from common import sqlite
from mcp_servers.knowledge.trial_criteria import age_years


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
