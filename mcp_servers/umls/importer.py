"""Import a UMLS Metathesaurus release (MRCONSO.RRF + MRSTY.RRF) into the UMLS concept store.

Invariants:
- Rows are streamed line by line and written in batches of ``BATCH_ROWS``: memory stays bounded
  however large the release is. Derived tables (concepts, codes, FTS, typo index) are built in
  SQL by ``umls.store.finalize``, the same code the shipped starter subset goes through.
- Kept MRCONSO rows: LAT = ENG, SUPPRESS = N, SAB in ``KEEP_SABS``. Everything else is counted
  as skipped with its reason. MRSTY rows are kept for concepts that have a kept atom.
- Preferred name of a concept: the kept atom with TS=P, STT=PF, ISPREF=Y; failing that the best
  of TS=P, then STT=PF, then ISPREF=Y, then by source (SNOMED CT, RxNorm, MeSH, LOINC) and
  term type (PT, IN, MH, LN ...). Ties go to the first row read.
- The import replaces the store's content in one transaction (readers keep the old snapshot
  until commit) and marks it ``meta.content = rrf`` so ``ensure_database`` leaves it alone.
  Curated abbreviations, synonyms and brand names of the starter subset are then added to the
  imported concepts with the same CUI (source ``CURATED``), so 'HTN' or 'Tylenol' still resolve.
- Importing the same files twice gives the same database.
- Progress is reported after every batch and at the end: ``progress(message)`` gets a line such
  as "UMLS import: 12.3 of 40.0 MB read (31%)"; ``byte_progress(done_bytes, total_bytes)`` gets
  the raw numbers (what ``appliance umls import`` shows as its progress bar). Reading ends at
  100% but the import is not done: the index builds that follow (curated names, concepts and
  codes, full-text index, typo index, commit) can take minutes on a full release, so each is
  announced as it starts through ``stage(name)`` and as a ``progress`` line.
- An input that yields no kept English atoms, or a file that stops inside its last line
  (truncated), raises ``UmlsImportError`` and the transaction is rolled back, so a wrong
  directory or a cut download never empties or half-fills a working database.
- The new content is validated before it replaces the old: it is built inside the same
  transaction, and a result with fewer than ``1 - MAX_SHRINK`` of the concepts the store held
  (a truncated or wrong file: "one valid line replaced 356 concepts with 1") is refused and
  rolled back unless ``replace=True`` (``appliance umls import --replace``). The swap is the
  commit: readers see the old content or the new, never a mix. The report gives both counts.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from common import sqlite
from common.sqlite import set_meta, write_transaction
from mcp_servers.umls import foundation, store

KEEP_SABS = ("SNOMEDCT_US", "RXNORM", "LNC", "MSH")
MAX_SHRINK = 0.2  # an import may leave the store with at most a fifth fewer concepts than before
BATCH_ROWS = 5000
MRCONSO_COLUMNS = 18  # CUI|LAT|TS|LUI|STT|SUI|ISPREF|AUI|SAUI|SCUI|SDUI|SAB|TTY|CODE|STR|SRL|SUPPRESS|CVF
MRSTY_COLUMNS = 6  # CUI|TUI|STN|STY|ATUI|CVF

ByteProgress = Callable[[int, int], None] | None
Progress = Callable[[str], None] | None


class UmlsImportError(foundation.UmlsError):
    """The RRF input is missing or holds nothing importable."""

_SAB_RANK = {"SNOMEDCT_US": 0, "RXNORM": 1, "MSH": 2, "LNC": 3}
_TTY_RANK = {"PT": 0, "IN": 0, "MH": 0, "LN": 0, "PIN": 1, "FN": 2, "BN": 3, "SY": 4}


@dataclass
class UmlsImportReport:
    """What an RRF import read, kept and skipped."""

    rows_read: int = 0
    atoms_kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    semtype_rows_read: int = 0
    semtype_rows_kept: int = 0
    concepts: int = 0
    previous_concepts: int = 0
    curated_atoms_added: int = 0
    bytes_read: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())) or "none"
        return (
            f"UMLS import: {self.concepts} concepts from {self.atoms_kept} of {self.rows_read} MRCONSO rows "
            f"(skipped: {skipped}); semantic types kept {self.semtype_rows_kept} of {self.semtype_rows_read} "
            f"MRSTY rows; curated names added {self.curated_atoms_added}; "
            f"{self.bytes_read / 1e6:.1f} MB in {self.seconds:.1f} s; "
            f"the store held {self.previous_concepts} concepts before, {self.concepts} now"
        )


def pref_rank(ts: str, stt: str, ispref: str, sab: str, tty: str) -> int:
    """Lower is more preferred (see the module docstring)."""
    level = 0 if (ts, stt, ispref) == ("P", "PF", "Y") else 1 + (ts != "P") * 4 + (stt != "PF") * 2 + (ispref != "Y")
    return level * 100 + _SAB_RANK.get(sab, 9) * 10 + _TTY_RANK.get(tty, 9)


class _Reader:
    """Yields the fields of pipe-delimited RRF lines and counts bytes for the progress callback."""

    def __init__(self, total: int, progress: Progress, byte_progress: ByteProgress):
        self.done, self.total = 0, total
        self.progress, self.byte_progress = progress, byte_progress

    def lines(self, path: Path, columns: int, report: UmlsImportReport) -> Iterator[list[str]]:
        with open(path, "rb") as handle:
            for raw in handle:
                self.done += len(raw)
                fields = raw.decode("utf-8", errors="replace").rstrip("\r\n").split("|")
                if fields and fields[-1] == "":
                    fields.pop()  # RRF lines end with a trailing pipe
                if len(fields) != columns:
                    if not raw.endswith(b"\n"):  # the file stops inside its last line
                        raise UmlsImportError(f"{path.name} cannot be read in full: it ends in the middle of a line "
                                              "(truncated?); nothing was imported")
                    report.skipped[f"malformed {path.name} lines"] += 1
                    continue
                yield fields

    def tick(self) -> None:
        if self.byte_progress:
            self.byte_progress(self.done, self.total)
        if self.progress:
            percent = 100 * self.done // self.total if self.total else 100
            self.progress(f"UMLS import: {self.done / 1e6:.1f} of {self.total / 1e6:.1f} MB read ({percent}%)")


def _atoms(reader: _Reader, path: Path, report: UmlsImportReport) -> Iterator[tuple]:
    for f in reader.lines(path, MRCONSO_COLUMNS, report):
        report.rows_read += 1
        cui, lat, ts, _lui, stt, _sui, ispref = f[:7]
        sab, tty, code, text, suppress = f[11], f[12], f[13], f[14], f[16]
        if lat != "ENG":
            report.skipped["non-English"] += 1
        elif suppress != "N":
            report.skipped["suppressed"] += 1
        elif sab not in KEEP_SABS:
            report.skipped["other source vocabularies"] += 1
        elif not foundation.CUI_RE.match(cui):
            report.skipped["malformed MRCONSO lines"] += 1
        else:
            yield (cui, text, sab, tty, code, pref_rank(ts, stt, ispref, sab, tty))


def _batches(rows: Iterator[tuple], size: int = BATCH_ROWS) -> Iterator[list[tuple]]:
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _add_curated(db) -> int:
    """Curated names of starter concepts whose CUI was imported, unless already present."""
    added = 0
    for concept in store.read_starter():
        if not db.execute("SELECT 1 FROM atoms WHERE cui = ? LIMIT 1", [concept["cui"]]).fetchone():
            continue
        have = {r[0] for r in db.execute("SELECT norm FROM atoms WHERE cui = ?", [concept["cui"]])}
        rows = [a for a in store.starter_atoms(concept, include_preferred=True) if foundation.norm(a[1]) not in have]
        # Curated names never become the preferred name of an imported concept.
        added += store.insert_atoms(db, [(c, s, sab, tty, code, 10_000 + r) for c, s, sab, tty, code, r in rows])
    return added


def _refuse_shrink(report: UmlsImportReport, replace: bool) -> None:
    """Raise (rolling the import back) when the new content is much smaller than the old."""
    before, after = report.previous_concepts, report.concepts
    if replace or not before or after >= before * (1 - MAX_SHRINK):
        return
    raise UmlsImportError(
        f"the import would replace the store's {before} concepts with {after} (a loss of "
        f"{1 - after / before:.0%}, more than the {MAX_SHRINK:.0%} allowed); nothing was changed. "
        "Check the input, or run again with --replace to accept it"
    )


def import_rrf(db_path: Path, rrf_dir: Path, progress: Progress = None, byte_progress: ByteProgress = None,
               add_curated: bool = True, stage: Progress = None, replace: bool = False) -> UmlsImportReport:
    """Replace the UMLS store's content with the English, non-suppressed SNOMED CT, RxNorm,
    LOINC and MeSH atoms of ``rrf_dir/MRCONSO.RRF`` and their ``MRSTY.RRF`` semantic types;
    a result that shrinks the store by more than ``MAX_SHRINK`` needs ``replace``."""
    started = time.monotonic()

    def announce(name: str) -> None:
        if stage:
            stage(name)
        if progress:
            progress(f"UMLS import: {name}")

    db_path, rrf_dir = Path(db_path), Path(rrf_dir)
    mrconso, mrsty = rrf_dir / "MRCONSO.RRF", rrf_dir / "MRSTY.RRF"
    for path in (mrconso, mrsty):
        if not path.is_file():
            raise UmlsImportError(f"{path} not found (expected a UMLS Metathesaurus META directory)")
    report = UmlsImportReport()
    reader = _Reader(mrconso.stat().st_size + mrsty.stat().st_size, progress, byte_progress)
    with sqlite.building(db_path, foundation.STORE, foundation.MIGRATIONS) as db:
        with write_transaction(db):
            report.previous_concepts = db.execute("SELECT COUNT(*) FROM concepts").fetchone()[0]
            store.clear_content(db)
            for batch in _batches(_atoms(reader, mrconso, report)):
                report.atoms_kept += store.insert_atoms(db, batch)
                reader.tick()
            if not report.atoms_kept:
                raise UmlsImportError(f"{mrconso} holds no English, non-suppressed {'/'.join(KEEP_SABS)} rows")
            # Semantic types of every row go in; finalize() drops those of unknown concepts.
            for batch in _batches(reader.lines(mrsty, MRSTY_COLUMNS, report)):
                report.semtype_rows_read += len(batch)
                store.insert_semtypes(db, [(f[0], f[1], f[3]) for f in batch])
                reader.tick()
            reader.tick()  # reading is done: 100%, then the stages below
            if add_curated:
                announce("adding curated names")
                report.curated_atoms_added = _add_curated(db)
            report.concepts = store.finalize(db, announce)
            _refuse_shrink(report, replace)
            report.semtype_rows_kept = db.execute("SELECT COUNT(*) FROM semtypes").fetchone()[0]
            set_meta(db, "content", "rrf")
            set_meta(db, "rrf_source", str(rrf_dir.resolve()))
            set_meta(db, "starter_hash", "")
            announce("writing the database")
    report.bytes_read = reader.done
    announce("done")
    report.seconds = time.monotonic() - started
    return report


# -- synthetic release for benchmarks --------------------------------------------------------
_SYLLABLES = ("car", "dio", "neph", "ro", "pul", "mo", "gas", "tro", "hep", "at", "os", "te", "my", "el", "lin",
              "ar", "thr", "itis", "osis", "emia", "pathy", "algia", "ine", "ol", "pril", "stat", "mab", "cin")
_STYS = (("T047", "Disease or Syndrome"), ("T184", "Sign or Symptom"), ("T121", "Pharmacologic Substance"),
         ("T059", "Laboratory Procedure"), ("T060", "Diagnostic Procedure"))


def write_synthetic_rrf(rrf_dir: Path, n_concepts: int, seed: int = 7) -> None:
    """Write MRCONSO.RRF / MRSTY.RRF with ``n_concepts`` made-up concepts (CUIs C9xxxxxx), a few
    names each, plus rows the importer must skip (non-English, suppressed, other sources)."""
    rng = random.Random(seed)
    rrf_dir.mkdir(parents=True, exist_ok=True)

    def word() -> str:
        return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))

    aui = 0
    with open(rrf_dir / "MRCONSO.RRF", "w", encoding="utf-8") as conso, \
            open(rrf_dir / "MRSTY.RRF", "w", encoding="utf-8") as sty:
        for i in range(n_concepts):
            cui = f"C9{i:06d}"
            names = [" ".join(word() for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(2, 4))]
            for j, name in enumerate(names):
                aui += 1
                sab, tty, code = ("SNOMEDCT_US", "PT" if j == 0 else "SY", str(100000 + i)) if j % 2 == 0 \
                    else ("MSH", "MH" if j == 1 else "ET", f"D{i:06d}")
                ts, stt, ispref = ("P", "PF", "Y") if j == 0 else ("S", "PF", "N")
                conso.write(f"{cui}|ENG|{ts}|L{aui:07d}|{stt}|S{aui:07d}|{ispref}|A{aui:07d}||{code}||{sab}|{tty}|"
                            f"{code}|{name}|0|N|256|\n")
            if i % 10 == 0:
                aui += 1
                conso.write(f"{cui}|FRE|S|L{aui:07d}|PF|S{aui:07d}|Y|A{aui:07d}||||MSHFRE|MH|D{i:06d}|{word()}|3|N||\n")
                aui += 1
                conso.write(f"{cui}|ENG|S|L{aui:07d}|PF|S{aui:07d}|Y|A{aui:07d}||||MEDLINEPLUS|PT|X{i}|{word()}|0|N||\n")
                aui += 1
                conso.write(f"{cui}|ENG|S|L{aui:07d}|PF|S{aui:07d}|N|A{aui:07d}||{100000 + i}||SNOMEDCT_US|OAP|"
                            f"{100000 + i}|{word()}|4|O||\n")
            tui, name = _STYS[i % len(_STYS)]
            sty.write(f"{cui}|{tui}|A1.2.3|{name}|AT{i:08d}|256|\n")


def build_synthetic(db_path: Path, n_concepts: int, progress: Progress = None) -> UmlsImportReport:
    """Build a database of ``n_concepts`` synthetic concepts through ``import_rrf`` (benchmarks)."""
    with tempfile.TemporaryDirectory(prefix="umls-synthetic-") as tmp:
        write_synthetic_rrf(Path(tmp), n_concepts)
        return import_rrf(db_path, Path(tmp), progress=progress, add_curated=False, replace=True)
