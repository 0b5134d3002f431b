"""``appliance <area> import``: bulk data into the data home's databases.

Invariants:
- Each importer is idempotent and returns a report whose ``summary()`` says what was imported,
  updated and skipped, and why, and how big the store was before and after; the databases are
  created first if missing.
- The UMLS and knowledge importers validate before they replace: a result that would shrink
  the store by more than their threshold is refused, nothing changed, unless ``replace``
  (``--replace``); each run is one transaction, so the swap is atomic.
- An input that cannot be read in full (unreadable, truncated, not the format, nested too
  deeply) fails the whole import, nothing imported, as one ``ImportFailed`` line (exit 2);
  no third-party exception escapes. The EHR importer also stops before writing when the
  file would change what clinicians rely on, unless ``accept_changes`` (``ehr_db.fhir_import``);
  ``ImportFailed.cause`` keeps the importer's own error (its list of differences).
- stdout carries only the result (the summary the caller prints); the progress line goes to
  stderr, and only when stderr is a terminal (``common.progress.ProgressBar``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from appliance.errors import ApplianceError
from common import locations
from common.progress import ProgressBar
from common.user_files import file_problem

# (area, kind) -> (module, function, database path, ensure module)
IMPORTERS = {
    ("ehr", "fhir"): ("ehr_db.fhir_import", "import_fhir_bundle", locations.ehr_db_path, "ehr_db.setup"),
    ("knowledge", "openfda"): ("mcp_servers.knowledge.importers.driver", "import_openfda_labels", locations.knowledge_db_path, "mcp_servers.knowledge.store"),
    ("knowledge", "pubmed"): ("mcp_servers.knowledge.importers.driver", "import_pubmed_xml", locations.knowledge_db_path, "mcp_servers.knowledge.store"),
    ("knowledge", "ctgov"): ("mcp_servers.knowledge.importers.driver", "import_ctgov_studies", locations.knowledge_db_path, "mcp_servers.knowledge.store"),
    ("umls", "rrf"): ("mcp_servers.umls.importer", "import_rrf", locations.umls_db_path, "mcp_servers.umls.store"),
}


class ImportFailed(ApplianceError):
    """An import could not read its input, or was refused (nothing imported)."""

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause


class _ByteBar:
    """The progress of an import of millions of rows on the shared progress line: bytes read,
    then the stage under way (index builds after reading can take minutes, so 100% alone would
    look finished)."""

    def __init__(self) -> None:
        self.done = self.total = 0
        self.stage = "reading"
        self.line = ProgressBar()

    def bytes(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        self._draw()

    def step(self, name: str) -> None:
        self.stage = name
        self._draw()

    def _draw(self) -> None:
        fraction = self.done / self.total if self.total else 1.0
        filled = int(fraction * 40)
        line = (f"[{'#' * filled}{'.' * (40 - filled)}] {fraction:6.1%} of {self.total / 2**20:.1f} MiB"
                f" - {self.stage}")
        self.line.note(line[:100])

    def close(self) -> None:
        self.line.close()


def _expected_errors() -> tuple[type[BaseException], ...]:
    from ehr_db.errors import EhrError
    from mcp_servers.knowledge.store import KnowledgeError
    from mcp_servers.umls.importer import UmlsImportError

    return ValueError, OSError, EhrError, KnowledgeError, UmlsImportError, RecursionError


def run_import(area: str, kind: str, path: Path, *, replace: bool = False, accept_changes: bool = False):
    """Import ``path`` into the area's store; the importer's report (``summary()`` for people)."""
    try:
        module, func, db_path_of, setup = IMPORTERS[(area, kind)]
    except KeyError:
        raise ImportFailed(f"no importer for {area} {kind}") from None
    try:
        found = path.exists()
    except OSError as exc:  # a name too long, a folder that cannot be searched: not ENOENT
        raise ImportFailed(f"cannot read {path}: {exc.strerror}") from None
    if not found:
        raise ImportFailed(f"{path} does not exist")
    problem = file_problem(path, folder_ok=True)  # before anything opens it: a FIFO would wait forever
    if problem:
        raise ImportFailed(problem)
    db_path = db_path_of()
    db_path.parent.mkdir(parents=True, exist_ok=True)
    importlib.import_module(setup).ensure_database(db_path)
    importer = getattr(importlib.import_module(module), func)
    bar = _ByteBar()
    try:
        if area == "ehr":
            report = importer(db_path, path, accept_changes=accept_changes)
        elif area == "umls":
            report = importer(db_path, path, byte_progress=bar.bytes, stage=bar.step, replace=replace)
        else:  # knowledge: the bar follows the bytes read (a bulk ClinicalTrials.gov zip is ~500k files)
            report = importer(path, db_path=db_path, byte_progress=bar.bytes, stage=bar.step, replace=replace)
    except _expected_errors() as exc:  # the importers' own errors for unreadable input
        if isinstance(exc, RecursionError):
            raise ImportFailed(f"{area} import of {path} failed: the input is nested too deeply to read; nothing "
                               "was imported") from None
        raise ImportFailed(f"{area} import of {path} failed: {exc}", exc) from None
    finally:
        bar.close()  # ends the progress line, when one was drawn
    return report
