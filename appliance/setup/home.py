"""``appliance init``: create or update the data home idempotently.

Invariants:
- Safe to run any number of times; it only adds what is missing (directories, databases at
  their latest migration, shipped starter content) and never deletes data.
- The data home and everything in it end up private (directories 0700, files 0600), including
  what an older version created with looser modes.
- The accounts and sessions databases are created (empty) before the EHR, so each keeps a copy
  of the EHR's chain head (``ehr_db.heads``); init then says, one WARNING line each, when a
  copy shows the record older than it (rolled back) or rewritten. It never "repairs" that:
  the copies stay as evidence.
- The record export's Ed25519 key pair is made once (``ehr_db.signing``) and kept; init never
  replaces it.
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

from common import locations
from common.errors import ApplianceError


class InitError(ApplianceError):
    """A store of the data home cannot be created or updated (the message names the file)."""

# (label, module, function, path function): each store's idempotent builder.
STORES = (
    ("EHR", "ehr_db.setup", "ensure_database", locations.ehr_db_path),
    ("UMLS subset", "mcp_servers.umls.store", "ensure_database", locations.umls_db_path),
    ("Clinical knowledge", "mcp_servers.knowledge.store", "ensure_database", locations.knowledge_db_path),
)


def init_home(progress: Callable[[str], None] = print, with_model: bool = True) -> Path:
    home = locations.data_home()
    for directory in (home, locations.logs_dir()):
        locations.private_dir(directory)
    progress(f"data home: {home}")
    if with_model:
        from models.assemble import assemble_default_model

        progress(f"default model: {assemble_default_model(locations.models_dir())}")
    _prepare_head_keepers()
    for label, module, func, path_of in STORES:
        path = path_of()
        progress(f"{label}: {path}")
        ensure = getattr(importlib.import_module(module), func)
        try:
            ensure(path, progress=lambda msg, label=label: progress(f"  {label}: {msg}"))
        except sqlite3.DatabaseError as exc:  # damage the integrity check at first open did not see
            raise InitError(f"{path.name} cannot be used ({exc}); restore it from a backup, or move it aside "
                            "and run `appliance init`") from None
    for warning in _record_warnings():
        progress(f"  EHR: WARNING: {warning}")
    _export_key(progress)
    tightened = locations.make_private(home)
    if tightened:
        progress(f"made {tightened} file(s) and folder(s) in the data home private (0600/0700)")
    return home


def _prepare_head_keepers() -> None:
    """The accounts and sessions databases, created and migrated through their own stores."""
    from appliance.accounts import AccountError, AccountStore
    from appliance.accounts.sessions import SessionStore, SessionStoreError

    try:
        AccountStore(locations.accounts_db_path()).prepare()
        SessionStore(locations.sessions_db_path())
    except (AccountError, SessionStoreError) as exc:
        raise InitError(f"the accounts or sessions database cannot be prepared ({exc})") from None


def _export_key(progress: Callable[[str], None]) -> None:
    """The record export's signing key pair (``ehr_db.signing``): made once, never replaced."""
    from ehr_db.errors import EhrError
    from ehr_db.signing import ensure_key, fingerprint, load_public

    try:
        made = ensure_key(locations.export_key_path(), locations.export_public_key_path())
        shown = fingerprint(load_public(locations.export_public_key_path()))
    except (EhrError, OSError) as exc:
        raise InitError(f"the export signing key cannot be made or read ({exc})") from None
    progress(f"export signing key: {'made' if made else 'present'} (Ed25519, fingerprint {shown[:16]}...)")


def _record_warnings() -> list[str]:
    """Each copy of the chain head that shows the EHR older than it, or rewritten."""
    from ehr_db.repository import EhrRepository

    return EhrRepository(locations.ehr_db_path()).custody_warnings()
