"""Where the appliance keeps its state.

Invariant: every file the appliance writes at run time (databases, sessions, logs, built
indexes) lives under ``data_home()``, which is ``$APPLIANCE_HOME`` when set, otherwise
``$XDG_DATA_HOME/clinical-appliance`` (``~/.local/share/clinical-appliance``). This module
imports nothing from the project, so the MCP servers may use it too.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_home() -> Path:
    """The data directory (not created here; ``appliance init`` creates it)."""
    env = os.environ.get("APPLIANCE_HOME")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "clinical-appliance"


def ehr_db_path() -> Path:
    return data_home() / "ehr.sqlite"


def umls_db_path() -> Path:
    return data_home() / "umls.sqlite"


def knowledge_db_path() -> Path:
    return data_home() / "knowledge.sqlite"


def sessions_db_path() -> Path:
    return data_home() / "sessions.sqlite"


def logs_dir() -> Path:
    return data_home() / "logs"


def models_dir() -> Path:
    """Shipped and operator-placed GGUF files live in the project's ``models/`` folder."""
    return PROJECT_ROOT / "models"
