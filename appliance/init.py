"""``appliance init``: create or update the data home idempotently.

Invariants:
- Safe to run any number of times; it only adds what is missing (directories, databases at
  their latest migration, shipped starter content) and never deletes data.
- The data home and everything in it end up private (directories 0700, files 0600), including
  what an older version created with looser modes.
"""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path
from typing import Callable

from common import locations
from common.errors import ApplianceError


class InitError(ApplianceError):
    """A store of the data home cannot be created or updated (the message names the file)."""

# (label, module, function, path function): each store's idempotent builder.
STORES = (
    ("EHR", "ehr_db.setup", "ensure_database", locations.ehr_db_path),
    ("UMLS subset", "mcp_servers.umls_store", "ensure_database", locations.umls_db_path),
    ("Clinical knowledge", "mcp_servers.knowledge_store", "ensure_database", locations.knowledge_db_path),
)


def init_home(progress: Callable[[str], None] = print, with_model: bool = True) -> Path:
    home = locations.data_home()
    for directory in (home, locations.logs_dir()):
        locations.private_dir(directory)
    progress(f"data home: {home}")
    if with_model:
        from models.assemble import assemble_default_model

        progress(f"default model: {assemble_default_model(locations.models_dir())}")
    for label, module, func, path_of in STORES:
        path = path_of()
        progress(f"{label}: {path}")
        ensure = getattr(importlib.import_module(module), func)
        try:
            ensure(path, progress=lambda msg, label=label: progress(f"  {label}: {msg}"))
        except sqlite3.DatabaseError as exc:  # damage the integrity check at first open did not see
            raise InitError(f"{path.name} cannot be used ({exc}); restore it from a backup, or move it aside "
                            "and run `appliance init`") from None
    tightened = locations.make_private(home)
    if tightened:
        progress(f"made {tightened} file(s) and folder(s) in the data home private (0600/0700)")
    return home
