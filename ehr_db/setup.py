"""``ensure_database``: create or update the EHR database and load the demo patients.

Invariant: idempotent. It migrates the schema to the latest version, adds demo patients that
are absent and refreshes rows that came from the demo source (``source = 'demo'``) when the
shipped demo file or code catalog changed; it never deletes a record and never rewrites one a
clinician or an import wrote, so a second call changes nothing and returns quickly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from common.sqlite import opened
from ehr_db import heads
from ehr_db.demo_loader import sync_demo_patients
from ehr_db.migrations import migrate


def ensure_database(path: Path, progress: Callable[[str], None] | None = None, *,
                    load_demo: bool = True) -> None:
    """Create/migrate the EHR at ``path``, load absent demo patients and refresh demo rows."""
    say = progress or (lambda message: None)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with opened(path) as db:
        applied = migrate(db)
        say(f"schema: {len(applied)} migration(s) applied" if applied else "schema up to date")
        if load_demo:
            load = sync_demo_patients(db)
            if load.patients_added:
                say(f"loaded {load.patients_added} synthetic demo patient(s)")
            if load.rows_refreshed or load.rows_added:
                say(f"demo records refreshed: {load.rows_refreshed} updated, {load.rows_added} added")
            if not (load.patients_added or load.rows_refreshed or load.rows_added):
                say("demo patients present")
        heads.keep(db)
