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
- Rows carry ``origin``: ``starter`` (shipped files under ``data/``) or ``import``
  (openFDA / MEDLINE / ClinicalTrials.gov importers). Loading the starter content never
  overwrites an imported row; imports always win over starter rows.
- ``ensure_database`` is idempotent: a second call with unchanged shipped files only checks the
  migrations and a content hash, and changes nothing.

The store's modules: ``knowledge.migrations`` (migrations), ``knowledge.names`` (name keys),
``knowledge.writes`` (upserts), ``knowledge.starter`` (the shipped content); this one holds the
errors, the connection and ``ensure_database``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import sqlite_utils

from common import sqlite
from common.sqlite import get_meta, set_meta, write_transaction
from mcp_servers.knowledge.migrations import MIGRATIONS, STORE
from mcp_servers.knowledge.starter import load_starter_content, starter_hash

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


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations in order; return the names applied."""
    return sqlite.migrate(db, STORE, MIGRATIONS)


def connect(path: Path | str, read_only: bool = False) -> sqlite_utils.Database:
    """A connection of its own to the knowledge database at ``path``."""
    return sqlite.connect(path, read_only=read_only, durable=False)


def ensure_database(path: Path, progress: Progress = None) -> None:
    """Create or migrate the knowledge database at ``path`` and load the shipped starter content.

    Idempotent: with unchanged shipped files a second call changes nothing.
    """
    say = progress or (lambda _msg: None)
    with sqlite.building(path, STORE, MIGRATIONS, say) as db:
        digest = starter_hash()
        if get_meta(db, "starter_hash") == digest:
            say("starter content up to date")
            return
        with write_transaction(db):
            counts = load_starter_content(db)
            set_meta(db, "starter_hash", digest)
        say("starter content loaded: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
