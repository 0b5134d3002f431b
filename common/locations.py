"""Where the appliance keeps its state.

Invariants:
- Every file the appliance writes at run time (databases, sessions, logs, built indexes)
  lives under ``data_home()``, which is ``$APPLIANCE_HOME`` when set, otherwise
  ``$XDG_DATA_HOME/clinical-appliance`` (``~/.local/share/clinical-appliance``). This module
  imports nothing from the project, so the MCP servers may use it too.
- Those files may hold patient data, so they are private to the account that runs the
  appliance: the entry points (``appliance`` command, MCP server launchers) run under
  ``PRIVATE_UMASK`` (files 0600, directories 0700), ``common.sqlite`` creates database files
  0600 whatever the umask (SQLite gives their -wal and -shm the database file's mode), and
  ``make_private`` tightens what an older version created.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from common import environment

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PRIVATE_UMASK = 0o077  # new files 0600, new directories 0700
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) as a 0700 directory; tighten it if it exists."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    os.chmod(path, PRIVATE_DIR_MODE)
    return path


def make_private(root: Path) -> int:
    """Tighten ``root`` and everything under it: directories 0700, files 0600 (symlinks are
    left alone). Returns how many modes were changed."""
    changed = 0
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        want = PRIVATE_DIR_MODE if path.is_dir() else PRIVATE_FILE_MODE
        try:
            if path.stat().st_mode & 0o777 != want:
                os.chmod(path, want)
                changed += 1
        except FileNotFoundError:  # a -wal or -shm that went away meanwhile
            continue
    return changed


def data_home() -> Path:
    """The data directory (not created here; ``appliance init`` creates it)."""
    env = environment.read(environment.HOME)
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


def accounts_db_path() -> Path:
    """Clinician accounts (``appliance.accounts``): password hashes, so the file is 0600."""
    return data_home() / "accounts.sqlite"


def export_key_path() -> Path:
    """The record export's Ed25519 signing key (``ehr_db.signing``): private, made by ``appliance init``."""
    return data_home() / "export-signing.key"


def export_public_key_path() -> Path:
    """The signing key's public half (PEM), which ``appliance ehr export-key`` hands on."""
    return data_home() / "export-signing.pub"


def export_cursor_path() -> Path:
    """Where ``appliance ehr export --since-export`` keeps how far the last export reached."""
    return data_home() / "export-cursor.json"


def logs_dir() -> Path:
    return data_home() / "logs"


def models_dir() -> Path:
    """Where the embedded default model is assembled and operator files may be placed: the
    checkout's ``models/`` when running from a checkout (a ``pyproject.toml`` beside the
    packages), else (installed from wheels, e.g. from a bundle) ``installed_models_dir()``."""
    if (PROJECT_ROOT / "pyproject.toml").is_file():
        return PROJECT_ROOT / "models"
    return installed_models_dir()


def installed_models_dir() -> Path:
    """Where ``appliance model install`` puts operator-supplied models: ``$APPLIANCE_MODELS``,
    else ``models/`` in the data home."""
    env = environment.read(environment.MODELS)
    return Path(env).expanduser().resolve() if env else data_home() / "models"


def new_run_dir(kind: str, root: Path | None = None) -> Path:
    """A fresh private folder for one evaluation run, ``<root>/<kind>-<UTC stamp>[-n]`` (root:
    ``runs/`` in the data home)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = private_dir(root or data_home() / "runs")
    path = base / f"{kind}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = base / f"{kind}-{stamp}-{n}"
    return private_dir(path)


@contextmanager
def scratch_home(prefix: str) -> Iterator[Path]:
    """A fresh data home in a temporary folder for a check that must not touch the live one
    (smoke, bench, selftest): ``$APPLIANCE_HOME`` points at it meanwhile, ``$APPLIANCE_MODELS``
    keeps pointing where the installed models are, and both are restored afterwards."""
    saved = {name: os.environ.get(name) for name in (environment.HOME, environment.MODELS)}
    os.environ[environment.MODELS] = str(installed_models_dir())
    try:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            home = Path(tmp) / "home"
            os.environ[environment.HOME] = str(home)
            yield home
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
