"""Importers for the real bulk formats: openFDA drug labels, MEDLINE/PubMed XML and
ClinicalTrials.gov API v2 study JSON.

Invariants:
- Memory stays bounded whatever the file size: JSON arrays ("results", "studies") are decoded
  one element at a time, XML is parsed with ``iterparse``, clearing each finished article, and
  zip archives are read one member at a time (``knowledge_sources``, ``zip_stream``: not
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
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from common.sqlite import write_transaction
from mcp_servers.knowledge_pubmed import iter_pubmed_records
from mcp_servers.knowledge_sources import (  # noqa: F401 - ReadPosition, iter_sources, _JsonStream: this module's API
    UNREADABLE,
    ImportSourceError,
    ReadPosition,
    _JsonStream,
    checked_sources,
    iter_json_records,
    iter_sources,
    why,
)
from mcp_servers.knowledge_store import (
    KnowledgeError,
    connect,
    display_name,
    ensure_database,
    generic_for,
    get_drug,
    name_key,
    strip_salt,
    upsert_article,
    upsert_drug,
    upsert_trial,
)

PROGRESS_EVERY = 500
ByteProgress = Callable[[int, int], None] | None
MAX_SHRINK = 0.2  # an import may leave a table with at most a fifth fewer rows than before
STORE_TABLES = ("drugs", "articles", "trials")
Progress = Callable[[str], None] | None


class MalformedRecord(KnowledgeError):
    """A record's field has the wrong JSON type: the file is not in the format (the run stops)."""


class ImportRefused(KnowledgeError):
    """The import would shrink the store by more than ``MAX_SHRINK``; nothing was changed."""


@dataclass
class ImportReport:
    """What one import run did, for the CLI."""

    kind: str
    files: int = 0
    records: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    rows_before: dict = field(default_factory=dict)
    rows_after: dict = field(default_factory=dict)

    def count(self, status: str) -> None:
        setattr(self, status, getattr(self, status) + 1)

    def summary(self) -> str:
        text = (
            f"{self.kind}: {self.files} file(s), {self.records} record(s) read; {self.inserted} inserted, "
            f"{self.updated} updated, {self.unchanged} unchanged"
        )
        if self.deleted:
            text += f", {self.deleted} deleted"
        total = sum(self.skipped.values())
        text += f"; {total} skipped"
        if total:
            text += " (" + "; ".join(f"{reason}: {n}" for reason, n in self.skipped.most_common()) + ")"
        for note, n in self.notes.most_common():
            text += f"\n  note: {note}: {n}"
        if self.rows_after:
            sizes = (f"{t} {self.rows_before.get(t, 0)} -> {n}" for t, n in self.rows_after.items())
            text += "\n  store: " + ", ".join(sizes)
        return text


def _row_counts(db) -> dict[str, int]:
    return {t: db.execute(f"SELECT COUNT(*) FROM [{t}]").fetchone()[0] for t in STORE_TABLES}


def _refuse_shrink(report: ImportReport, replace: bool) -> None:
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
         replace: bool = False, byte_progress: ByteProgress = None, stage: Progress = None) -> ImportReport:
    """One import run (see the module invariants). ``progress`` gets "N records" every
    ``PROGRESS_EVERY`` records; ``byte_progress(done, total)`` how far the input files have been
    read, at the same moments; ``stage`` the step under way once reading is over (the final
    counts and the commit of a large import take a while)."""
    ensure_database(db_path)
    report = ImportReport(kind)
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


# -- openFDA drug labels ---------------------------------------------------------------------
_HEADING = re.compile(
    r"^\s*(\d+(\.\d+)*\s+)?(BOXED WARNING|CONTRAINDICATIONS|WARNINGS AND PRECAUTIONS|WARNINGS|DRUG INTERACTIONS|Do not use)\b\s*:?\s*"
)


def _texts(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value] if value else []
    return [t for t in (_HEADING.sub("", str(i)).strip() for i in items) if t]


def _label_rank(drug: dict) -> tuple:
    return (
        1 if drug.get("boxed_warning") else 0,
        1 if drug.get("product_type") == "HUMAN PRESCRIPTION DRUG" else 0,
        drug.get("effective_time") or "",
        drug.get("source_id") or "",
    )


def _stored_drug(row: dict) -> dict:
    out = dict(row)
    for column in ("brand_names", "synonyms", "contraindications", "major_warnings"):
        out[column] = json.loads(row[column] or "[]")
    return out


def _strings(value: Any) -> list[str]:
    """A field openFDA gives as a list of strings (one string counts as one item)."""
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return [i for i in items if isinstance(i, str) and i.strip()]


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _label_to_drug(db, label: dict) -> tuple[dict | None, str | None]:
    if label.get("openfda") is not None and not isinstance(label.get("openfda"), dict):
        raise MalformedRecord("openfda is not an object")
    openfda = _object(label.get("openfda"))
    generics = _strings(openfda.get("generic_name"))
    if not generics:
        return None, "no openfda.generic_name (label not harmonised by openFDA)"
    substances = _strings(openfda.get("substance_name"))
    if len(generics) > 1 or len(substances) > 1 or re.search(r",| and | with |/", generics[0].lower()):
        return None, "combination or multi-ingredient product"
    boxed = "\n".join(_texts(label.get("boxed_warning"))) or None
    contraindications = _texts(label.get("contraindications")) or _texts(label.get("do_not_use"))
    warnings = _texts(label.get("warnings_and_cautions")) or _texts(label.get("warnings"))
    if not (boxed or contraindications or warnings):
        return None, "no boxed warning, contraindication or warning sections"
    generic = generic_for(db, generics[0]) or strip_salt(name_key(generics[0]))
    generic_keys = {name_key(g) for g in generics} | {generic}
    brands = [display_name(b) for b in _strings(openfda.get("brand_name")) if strip_salt(name_key(b)) not in generic_keys]
    full_name = name_key(generics[0])
    set_id = str(label.get("set_id") or label.get("id") or "unknown")
    effective = label.get("effective_time") if isinstance(label.get("effective_time"), str) else None
    return {
        "generic_name": generic,
        "brand_names": brands,
        "synonyms": [full_name] if full_name != generic else [],
        "drug_class": (_strings(openfda.get("pharm_class_epc")) or [None])[0],
        "boxed_warning": boxed,
        "contraindications": contraindications,
        "major_warnings": warnings,
        "label_interactions": "\n".join(_texts(label.get("drug_interactions"))) or None,
        "source": f"openFDA drug label (set_id {set_id}, effective {effective or 'unknown'}): manufacturer label text",
        "source_id": set_id,
        "product_type": (_strings(openfda.get("product_type")) or [None])[0],
        "effective_time": effective,
        "demo": False,
    }, None


def _handle_label(db, label: Any, report: ImportReport) -> None:
    if not isinstance(label, dict):
        report.skipped["not a label object"] += 1
        return
    drug, reason = _label_to_drug(db, label)
    if drug is None:
        report.skipped[reason] += 1
        return
    row = get_drug(db, drug["generic_name"])
    origin = "import"
    if row is not None:
        existing = _stored_drug(row)
        keep = None
        if existing["origin"] == "import" and existing["source_id"] != drug["source_id"] \
                and _label_rank(existing) > _label_rank(drug):
            keep = "another label for an already-imported drug kept (brand names merged)"
        elif existing["origin"] == "starter" and existing["boxed_warning"] and not drug["boxed_warning"]:
            # Never lose a boxed warning to a label without one (e.g. an OTC Drug Facts label).
            keep = "demo record kept: it has a boxed warning and the imported label has none (brand names merged)"
        if keep:
            report.notes[keep] += 1
            origin = existing["origin"]
            drug = {**existing, "brand_names": existing["brand_names"] + drug["brand_names"],
                    "synonyms": existing["synonyms"] + drug["synonyms"]}
        else:
            drug["brand_names"] = existing["brand_names"] + drug["brand_names"]
            drug["synonyms"] = existing["synonyms"] + drug["synonyms"]
            drug["drug_class"] = drug["drug_class"] or existing["drug_class"]
    report.count(upsert_drug(db, drug, origin))


def import_openfda_labels(path: Path, db_path: Path, progress: Progress = None, replace: bool = False,
                          byte_progress: ByteProgress = None, stage: Progress = None) -> ImportReport:
    """Import openFDA drug label download files (``drug-label-*.json`` or ``.json.zip``)."""
    return _run("openFDA drug labels", path, db_path, (".json",),
                lambda stream: iter_json_records(stream, "results"), _handle_label, progress, replace,
                byte_progress, stage)


# -- ClinicalTrials.gov API v2 ---------------------------------------------------------------
_NCT = re.compile(r"^NCT\d{8}$")


def _location(loc: dict) -> str:
    return ", ".join(str(loc[k]) for k in ("facility", "city", "state", "country") if loc.get(k))


def _arm(group: dict) -> dict:
    """One arm group: its label, type (EXPERIMENTAL, PLACEBO_COMPARATOR...), description and
    the interventions it receives."""
    return {"label": group.get("label"), "type": group.get("type"), "description": group.get("description"),
            "interventions": [str(n) for n in group.get("interventionNames") or []]}


def _handle_study(db, study: Any, report: ImportReport) -> None:
    protocol = study.get("protocolSection") if isinstance(study, dict) else None
    if not isinstance(protocol, dict):
        report.skipped["not a ClinicalTrials.gov v2 study (no protocolSection)"] += 1
        return
    ident = _object(protocol.get("identificationModule"))
    nct_id = str(ident.get("nctId") or "").strip().upper()
    if not _NCT.match(nct_id):
        report.skipped["missing or malformed NCT id"] += 1
        return
    title = ident.get("briefTitle") or ident.get("officialTitle")
    if not isinstance(title, str) or not title.strip():
        report.skipped["no title"] += 1
        return
    status = _object(protocol.get("statusModule"))
    design = _object(protocol.get("designModule"))
    conditions = _object(protocol.get("conditionsModule"))
    eligibility = _object(protocol.get("eligibilityModule"))
    arms = _object(protocol.get("armsInterventionsModule"))
    locations = _object(protocol.get("contactsLocationsModule")).get("locations")
    trial = {
        "nct_id": nct_id, "title": title, "status": status.get("overallStatus"),
        "phases": _strings(design.get("phases")), "study_type": design.get("studyType"),
        "conditions": _strings(conditions.get("conditions")), "keywords": _strings(conditions.get("keywords")),
        "interventions": [i["name"] for i in arms.get("interventions") or [] if isinstance(i, dict) and i.get("name")],
        "arms": [_arm(g) for g in arms.get("armGroups") or [] if isinstance(g, dict) and g.get("label")],
        "locations": [s for s in (_location(loc) for loc in locations or [] if isinstance(loc, dict)) if s],
        "eligibility_criteria": eligibility.get("eligibilityCriteria"),
        "minimum_age": eligibility.get("minimumAge"), "maximum_age": eligibility.get("maximumAge"),
        "sex": eligibility.get("sex"),
        "last_update": (status.get("lastUpdatePostDateStruct") or {}).get("date"),
        "source": f"ClinicalTrials.gov record {nct_id} (API v2 JSON import)", "demo": False,
    }
    report.count(upsert_trial(db, trial, "import"))


def import_ctgov_studies(path: Path, db_path: Path, progress: Progress = None, replace: bool = False,
                         byte_progress: ByteProgress = None, stage: Progress = None) -> ImportReport:
    """Import ClinicalTrials.gov API v2 study JSON: one study per file, API pages
    (``{"studies": [...]}``), JSON arrays, or the bulk download (a zip of one file per study,
    about half a million), in bounded memory (``iter_sources``, ``iter_json_records``)."""
    return _run("ClinicalTrials.gov studies", path, db_path, (".json",),
                lambda stream: iter_json_records(stream, "studies"), _handle_study, progress, replace,
                byte_progress, stage)


# -- MEDLINE / PubMed XML --------------------------------------------------------------------
def _handle_pubmed(db, item: tuple[str, dict | None, str | None], report: ImportReport) -> None:
    action, article, detail = item
    if action == "skip":
        report.skipped[detail] += 1
    elif action == "delete":
        row = db.execute("SELECT origin FROM articles WHERE pmid = ?", [detail]).fetchone()
        if row and row[0] == "import":
            db.execute("DELETE FROM articles WHERE pmid = ?", [detail])
            report.count("deleted")
        else:
            report.notes["deletion for an article not imported here (ignored)"] += 1
    else:
        if not article.get("abstract"):
            report.notes["imported without an abstract"] += 1
        report.count(upsert_article(db, article, "import"))


def import_pubmed_xml(path: Path, db_path: Path, progress: Progress = None, replace: bool = False,
                      byte_progress: ByteProgress = None, stage: Progress = None) -> ImportReport:
    """Import MEDLINE/PubMed XML (``PubmedArticleSet``; baseline/update ``.xml.gz`` files)."""
    return _run("PubMed articles", path, db_path, (".xml",), iter_pubmed_records, _handle_pubmed, progress, replace,
                byte_progress, stage)


IMPORTERS: dict[str, Callable[..., ImportReport]] = {
    "openfda": import_openfda_labels,
    "pubmed": import_pubmed_xml,
    "ctgov": import_ctgov_studies,
}
