"""``appliance init``: create or update the data home idempotently.

Invariant: safe to run any number of times; it only adds what is missing (directories,
databases at their latest migration, shipped starter content) and never deletes data.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Callable

from common import locations

# (label, module, function, path function): each store's idempotent builder.
STORES = (
    ("EHR", "ehr_db.setup", "ensure_database", locations.ehr_db_path),
    ("UMLS subset", "mcp_servers.umls_store", "ensure_database", locations.umls_db_path),
    ("Clinical knowledge", "mcp_servers.knowledge_store", "ensure_database", locations.knowledge_db_path),
)


def init_home(progress: Callable[[str], None] = print, with_model: bool = True) -> Path:
    home = locations.data_home()
    for directory in (home, locations.logs_dir()):
        directory.mkdir(parents=True, exist_ok=True)
    progress(f"data home: {home}")
    if with_model:
        from models.assemble import assemble_default_model

        progress(f"default model: {assemble_default_model(locations.models_dir())}")
    for label, module, func, path_of in STORES:
        path = path_of()
        progress(f"{label}: {path}")
        ensure = getattr(importlib.import_module(module), func)
        ensure(path, progress=lambda msg, label=label: progress(f"  {label}: {msg}"))
    return home
