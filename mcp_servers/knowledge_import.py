"""Importers for the real bulk formats: openFDA drug labels, MEDLINE/PubMed XML and
ClinicalTrials.gov API v2 study JSON.

Invariants:
- Memory stays bounded whatever the file size: JSON arrays ("results", "studies") are decoded
  one element at a time, XML is parsed with ``iterparse``, clearing each finished article, and
  zip archives are read one member at a time (``zip_stream``: not ``zipfile``, whose directory
  of half a million members alone takes some 300 MiB).
- Upserts are idempotent: importing the same files twice reports everything ``unchanged`` the
  second time. Imported rows replace shipped starter rows; starter loading never overwrites them.
- Several openFDA labels for one generic keep the most informative label (boxed warning, then
  prescription over OTC, then the latest effective date); brand names from all of them are kept.
- Every record read is counted as inserted, updated, unchanged, deleted or skipped with a reason.
- One import run is one write transaction: the store changes all at once at the commit, or not
  at all (an error, a crash). Before committing, the run is checked: a store table left with
  fewer than ``1 - MAX_SHRINK`` of its rows (PubMed deletions can remove imported articles) is
  refused and rolled back unless ``replace=True`` (``--replace``). The report gives each
  table's rows before and after.
- Accepted inputs: a file, a directory (searched recursively), ``.zip`` archives (the openFDA and
  ClinicalTrials.gov download formats) and ``.gz`` files (PubMed baseline files).
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from common.sqlite import write_transaction
from mcp_servers import zip_stream
from mcp_servers.knowledge_pubmed import iter_pubmed_records
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


class ImportSourceError(KnowledgeError):
    """The import source is missing or is not in the expected format."""


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


# -- sources ---------------------------------------------------------------------------------
@dataclass
class ReadPosition:
    """How far an import has read its input, in bytes of the files on disk (a progress bar's
    measure: a zip member's place in its archive, a plain or gzip file's read offset)."""

    total: int = 0
    finished: int = 0  # bytes of the files read to their end
    current: Callable[[], int] = lambda: 0  # bytes read of the file being read

    @property
    def done(self) -> int:
        return min(self.total, self.finished + self.current())


def iter_sources(path: Path, suffixes: tuple[str, ...],
                 position: ReadPosition | None = None) -> Iterator[tuple[str, IO[bytes]]]:
    """Yield (name, binary stream) for every matching file, zip member or gzip file under path.

    Zip archives are read member by member in archive order (``zip_stream``), so a download of
    half a million files costs no more memory than one of ten. ``position`` follows the reading."""
    path = Path(path)
    if not path.exists():
        raise ImportSourceError(f"{path} does not exist")
    wanted = suffixes + tuple(s + ".gz" for s in suffixes) + (".zip",)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith(wanted))
    position = position or ReadPosition()
    position.total = sum(f.stat().st_size for f in files)
    for file in files:
        lower = file.name.lower()
        with open(file, "rb") as raw:
            if lower.endswith(".zip"):
                for member in zip_stream.iter_members(file):
                    if member.name.lower().endswith(suffixes):
                        position.current = lambda at=member.header_offset: at
                        with zip_stream.open_member(raw, member) as handle:
                            yield f"{file.name}:{member.name}", handle
            elif lower.endswith(".gz"):
                position.current = raw.tell
                with gzip.GzipFile(fileobj=raw, mode="rb") as handle:
                    yield file.name, handle
            else:
                position.current = raw.tell
                yield file.name, raw
        position.finished += file.stat().st_size
        position.current = lambda: 0


class _JsonStream:
    """Incremental reader: decodes one JSON value at a time from a large text stream."""

    CHUNK = 1 << 20

    def __init__(self, binary: IO[bytes]):
        self._text = io.TextIOWrapper(binary, encoding="utf-8-sig")
        self._decoder = json.JSONDecoder()
        self._buf = ""
        self._pos = 0
        self._eof = False

    def _fill(self) -> bool:
        data = self._text.read(self.CHUNK)
        self._buf = self._buf[self._pos:] + data
        self._pos = 0
        self._eof = not data
        return bool(data)

    def peek(self) -> str | None:
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in " \t\r\n":
                self._pos += 1
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill():
                return None

    def take(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} in JSON")
        self._pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError:
                if self._eof or not self._fill():
                    raise
                continue
            if end == len(self._buf) and not self._eof and self._fill():
                continue  # a number may continue in the next chunk: decode again
            self._pos = end
            return value

    def array_items(self) -> Iterator[Any]:
        self.take("[")
        if self.peek() == "]":
            self._pos += 1
            return
        while True:
            yield self.value()
            if self.peek() == ",":
                self._pos += 1
                continue
            self.take("]")
            return


def iter_json_records(binary: IO[bytes], array_key: str) -> Iterator[dict]:
    """Records from ``[...]``, ``{..., array_key: [...]}`` (streamed) or a single object."""
    stream = _JsonStream(binary)
    first = stream.peek()
    if first == "[":
        yield from stream.array_items()
        return
    stream.take("{")
    single: dict = {}
    found = False
    while stream.peek() != "}":
        key = stream.value()
        stream.take(":")
        if key == array_key and stream.peek() == "[":
            found = True
            yield from stream.array_items()
        else:
            single[key] = stream.value()
        if stream.peek() == ",":
            stream.take(",")
    if not found:
        yield single


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
            for name, stream in iter_sources(path, suffixes, position):
                report.files += 1
                try:
                    for record in records(stream):
                        report.records += 1
                        handle(db, record, report)
                        if report.records % PROGRESS_EVERY == 0:
                            tell()
                except (ValueError, SyntaxError, UnicodeDecodeError) as exc:  # malformed file: keep what was read
                    report.skipped[f"unreadable file ({type(exc).__name__})"] += 1
                    report.notes[f"stopped reading {name}"] += 1
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


def _label_to_drug(db, label: dict) -> tuple[dict | None, str | None]:
    openfda = label.get("openfda") or {}
    generics = [g for g in openfda.get("generic_name") or [] if str(g).strip()]
    if not generics:
        return None, "no openfda.generic_name (label not harmonised by openFDA)"
    substances = openfda.get("substance_name") or []
    if len(generics) > 1 or len(substances) > 1 or re.search(r",| and | with |/", generics[0].lower()):
        return None, "combination or multi-ingredient product"
    boxed = "\n".join(_texts(label.get("boxed_warning"))) or None
    contraindications = _texts(label.get("contraindications")) or _texts(label.get("do_not_use"))
    warnings = _texts(label.get("warnings_and_cautions")) or _texts(label.get("warnings"))
    if not (boxed or contraindications or warnings):
        return None, "no boxed warning, contraindication or warning sections"
    generic = generic_for(db, generics[0]) or strip_salt(name_key(generics[0]))
    generic_keys = {name_key(g) for g in generics} | {generic}
    brands = [display_name(b) for b in openfda.get("brand_name") or [] if strip_salt(name_key(b)) not in generic_keys]
    full_name = name_key(generics[0])
    set_id = label.get("set_id") or label.get("id") or "unknown"
    effective = label.get("effective_time")
    return {
        "generic_name": generic,
        "brand_names": brands,
        "synonyms": [full_name] if full_name != generic else [],
        "drug_class": (openfda.get("pharm_class_epc") or [None])[0],
        "boxed_warning": boxed,
        "contraindications": contraindications,
        "major_warnings": warnings,
        "label_interactions": "\n".join(_texts(label.get("drug_interactions"))) or None,
        "source": f"openFDA drug label (set_id {set_id}, effective {effective or 'unknown'}): manufacturer label text",
        "source_id": set_id,
        "product_type": (openfda.get("product_type") or [None])[0],
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
    ident = protocol.get("identificationModule") or {}
    nct_id = str(ident.get("nctId") or "").strip().upper()
    if not _NCT.match(nct_id):
        report.skipped["missing or malformed NCT id"] += 1
        return
    title = ident.get("briefTitle") or ident.get("officialTitle")
    if not title:
        report.skipped["no title"] += 1
        return
    status = protocol.get("statusModule") or {}
    design = protocol.get("designModule") or {}
    conditions = protocol.get("conditionsModule") or {}
    eligibility = protocol.get("eligibilityModule") or {}
    arms = protocol.get("armsInterventionsModule") or {}
    locations = (protocol.get("contactsLocationsModule") or {}).get("locations") or []
    trial = {
        "nct_id": nct_id, "title": title, "status": status.get("overallStatus"),
        "phases": design.get("phases") or [], "study_type": design.get("studyType"),
        "conditions": conditions.get("conditions") or [], "keywords": conditions.get("keywords") or [],
        "interventions": [i["name"] for i in arms.get("interventions") or [] if i.get("name")],
        "arms": [_arm(g) for g in arms.get("armGroups") or [] if isinstance(g, dict) and g.get("label")],
        "locations": [s for s in (_location(loc) for loc in locations) if s],
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
