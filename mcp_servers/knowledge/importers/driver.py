"""Importers for the real bulk formats: openFDA drug labels, MEDLINE/PubMed XML and
ClinicalTrials.gov API v2 study JSON.

Invariants:
- Memory stays bounded whatever the file size: JSON arrays ("results", "studies") are decoded
  one element at a time, XML is parsed with ``iterparse``, clearing each finished article, and
  zip archives are read one member at a time (``knowledge.importers.sources``, ``zip_stream``: not
  ``zipfile``, whose directory of half a million members alone takes some 300 MiB).
- Upserts are idempotent: importing the same files twice reports everything ``unchanged`` the
  second time. Imported rows replace shipped starter rows; starter loading never overwrites them.
- Several openFDA labels for one generic keep the most informative label (boxed warning, then
  prescription over OTC, then the latest effective date); brand names from all of them are kept.
- Every record read is counted as inserted, updated, unchanged, deleted or skipped with a reason.
- A file that cannot be read in full (unreadable, truncated, not the format, damaged zip or
  gzip, nested too deeply, a record whose fields have the wrong JSON types such as
  ``{"openfda": "x"}``) fails the whole run with ``ImportSourceError`` naming the file and why:
  nothing is imported, never "some records and a note", never a traceback.
- One import run is one write transaction: the store changes all at once at the commit, or not
  at all (an error, a crash). Before committing, the run is checked: a store table left with
  fewer than ``1 - MAX_SHRINK`` of its rows (PubMed deletions can remove imported articles) is
  refused and rolled back unless ``replace=True`` (``--replace``). The report gives each
  table's rows before and after.
- Accepted inputs: a file, a directory (searched recursively), ``.zip`` archives (the openFDA and
  ClinicalTrials.gov download formats) and ``.gz`` files (PubMed baseline files).

This module is the driver (one run, its transaction and its checks); each source's records are
mapped by its own module: ``knowledge.importers.openfda``, ``knowledge.importers.ctgov``, ``knowledge.importers.pubmed``.
"""


from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from common.sqlite import write_transaction
from mcp_servers.knowledge.importers.ctgov import handle_study
from mcp_servers.knowledge.importers.openfda import handle_label
from mcp_servers.knowledge.importers.pubmed import handle_pubmed, iter_pubmed_records
from mcp_servers.knowledge.importers.records import (
    KnowledgeImportReport,
    MalformedRecord,
)
from mcp_servers.knowledge.importers.sources import (
    UNREADABLE,
    ImportSourceError,
    ReadPosition,
    checked_sources,
    iter_json_records,
    why,
)
from mcp_servers.knowledge.store import KnowledgeError, connect, ensure_database

PROGRESS_EVERY = 500
ByteProgress = Callable[[int, int], None] | None
MAX_SHRINK = 0.2  # an import may leave a table with at most a fifth fewer rows than before
STORE_TABLES = ("drugs", "articles", "trials")
Progress = Callable[[str], None] | None


class ImportRefused(KnowledgeError):
    """The import would shrink the store by more than ``MAX_SHRINK``; nothing was changed."""


def _row_counts(db) -> dict[str, int]:
    return {t: db.execute(f"SELECT COUNT(*) FROM [{t}]").fetchone()[0] for t in STORE_TABLES}


def _refuse_shrink(report: KnowledgeImportReport, replace: bool) -> None:
    """Raise (rolling the run back) when a table would lose more than ``MAX_SHRINK`` of its rows."""
    for table, after in report.rows_after.items():
        before = report.rows_before.get(table, 0)
        if not replace and before and after < before * (1 - MAX_SHRINK):
            raise ImportRefused(
                f"the import would leave {after} of the store's {before} {table} (a loss of {1 - after / before:.0%}, "
                f"more than the {MAX_SHRINK:.0%} allowed); nothing was changed. Check the input, or run again "
                "with --replace to accept it"
            )


def _run(kind: str, path: Path, db_path: Path, suffixes: tuple[str, ...],
         records: Callable[[IO[bytes]], Iterator[Any]], handle: Callable, progress: Progress,
         replace: bool = False, byte_progress: ByteProgress = None, stage: Progress = None) -> KnowledgeImportReport:
    """One import run (see the module invariants). ``progress`` gets "N records" every
    ``PROGRESS_EVERY`` records; ``byte_progress(done, total)`` how far the input files have been
    read, at the same moments; ``stage`` the step under way once reading is over (the final
    counts and the commit of a large import take a while)."""
    ensure_database(db_path)
    report = KnowledgeImportReport(kind)
    position = ReadPosition()
    db = connect(db_path)

    def tell() -> None:
        if progress:
            progress(f"{report.records} records")
        if byte_progress:
            byte_progress(position.done, position.total)
        if stage:
            stage(f"reading: {report.records:,} records")

    try:
        with write_transaction(db):
            report.rows_before = _row_counts(db)
            for name, stream in checked_sources(path, suffixes, position):
                report.files += 1
                try:
                    for record in records(stream):
                        report.records += 1
                        try:
                            handle(db, record, report)
                        except MalformedRecord as exc:
                            raise ImportSourceError(f"{name}: record {report.records} is malformed ({exc}); nothing "
                                                    "was imported") from None
                        except (AttributeError, TypeError, KeyError, IndexError):
                            raise ImportSourceError(f"{name}: record {report.records} has a field of an unexpected "
                                                    "JSON type; nothing was imported") from None
                        if report.records % PROGRESS_EVERY == 0:
                            tell()
                except RecursionError:
                    raise ImportSourceError(f"{name} is nested too deeply to read; nothing was imported") from None
                except UNREADABLE as exc:  # the whole run rolls back: never a part of a file
                    raise ImportSourceError(f"{name} cannot be read in full ({why(exc)}); nothing was "
                                            "imported") from None
            if report.files == 0:
                raise ImportSourceError(f"no {'/'.join(suffixes)} files found under {path}")
            tell()
            if stage:
                stage(f"{report.records:,} records read; checking the store")
            report.rows_after = _row_counts(db)
            _refuse_shrink(report, replace)
            if stage:
                stage("committing")
    finally:
        db.close()
    if stage:
        stage("done")
    return report


# -- the sources ---------------------------------------------------------------------------
def import_openfda_labels(path: Path, db_path: Path, progress: Progress = None, replace: bool = False,
                          byte_progress: ByteProgress = None, stage: Progress = None) -> KnowledgeImportReport:
    """Import openFDA drug label download files (``drug-label-*.json`` or ``.json.zip``)."""
    return _run("openFDA drug labels", path, db_path, (".json",),
                lambda stream: iter_json_records(stream, "results"), handle_label, progress, replace,
                byte_progress, stage)


def import_ctgov_studies(path: Path, db_path: Path, progress: Progress = None, replace: bool = False,
                         byte_progress: ByteProgress = None, stage: Progress = None) -> KnowledgeImportReport:
    """Import ClinicalTrials.gov API v2 study JSON: one study per file, API pages
    (``{"studies": [...]}``), JSON arrays, or the bulk download (a zip of one file per study,
    about half a million), in bounded memory (``iter_sources``, ``iter_json_records``)."""
    return _run("ClinicalTrials.gov studies", path, db_path, (".json",),
                lambda stream: iter_json_records(stream, "studies"), handle_study, progress, replace,
                byte_progress, stage)


def import_pubmed_xml(path: Path, db_path: Path, progress: Progress = None, replace: bool = False,
                      byte_progress: ByteProgress = None, stage: Progress = None) -> KnowledgeImportReport:
    """Import MEDLINE/PubMed XML (``PubmedArticleSet``; baseline/update ``.xml.gz`` files)."""
    return _run("PubMed articles", path, db_path, (".xml",), iter_pubmed_records, handle_pubmed, progress, replace,
                byte_progress, stage)


IMPORTERS: dict[str, Callable[..., KnowledgeImportReport]] = {
    "openfda": import_openfda_labels,
    "pubmed": import_pubmed_xml,
    "ctgov": import_ctgov_studies,
}
