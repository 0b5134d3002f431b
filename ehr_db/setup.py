"""``ensure_database``: create or update the EHR database and load the demo patients.

Invariant: idempotent and additive. It migrates the schema to the latest version and adds
demo patients that are absent; it never deletes or rewrites existing records, so a second
call changes nothing and returns quickly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ehr_db.db import opened
from ehr_db.demo_loader import load_demo_patients
from ehr_db.migrations import migrate


def ensure_database(path: Path, progress: Callable[[str], None] | None = None, *,
                    load_demo: bool = True) -> None:
    """Create/migrate the EHR at ``path`` and load the synthetic demo patients if absent."""
    say = progress or (lambda message: None)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with opened(path) as db:
        applied = migrate(db)
        say(f"schema: {len(applied)} migration(s) applied" if applied else "schema up to date")
        if load_demo:
            added = load_demo_patients(db)
            say(f"loaded {added} synthetic demo patient(s)" if added else "demo patients present")
