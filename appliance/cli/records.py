"""``appliance audit verify|show`` and ``appliance ehr backup|restore|export|export-key|verify-export``:
the record's custody, and the record handed on.

Invariants:
- Exit codes follow ``appliance.cli``: 0 done, 1 the audit chain does not verify (a check
  failed, as for ``smoke``; a backup is still written, to keep the evidence), 2 an expected failure (no database, a damaged one, a refused
  restore), always one line on stderr and never a traceback.
- ``audit verify`` and ``audit show`` only read. ``show`` prints the audit rows of one
  patient (for review by whoever may read the record) and the reads that showed the patient
  (``read_log``: who, when, which tool, which terminal) to stdout only; nothing is logged. A
  write's approval (approved or OVERRIDE, by whom) and a safety report (findings by severity,
  the override reason) are shown in a few words; ``--json`` keeps every row whole.
- ``--json`` prints one JSON object.
- ``audit verify`` also checks every clinical row against its digest and the chain head
  against its copies (``ehr_db.custody``, ``ehr_db.heads``); ``ehr backup --verify`` checks a
  backup against its manifest without restoring; ``ehr import`` prints each change it would
  make to what clinicians rely on and stops (exit 2) unless ``--accept-changes``.
- ``ehr export`` writes a new signed file (never overwrites; nothing on failure) and
  ``ehr verify-export`` exits 1 with one line naming the first problem (``ehr_db.fhir_export``).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from appliance.cli import options
from appliance.cli.options import Tree
from appliance.cli.support import print_report
from appliance.errors import ApplianceError
from common import locations


class RecordCommandError(ApplianceError):
    """An audit, backup or restore command could not run (the message says why)."""


@contextmanager
def _edge() -> Iterator[None]:
    """The record's own failures, SQLite's and the file system's, as one clear line (exit 2)."""
    from ehr_db.errors import EhrError

    try:
        yield
    except EhrError as exc:
        raise RecordCommandError(str(exc)) from None
    except sqlite3.Error as exc:
        raise RecordCommandError(f"the health record database cannot be read ({type(exc).__name__}: {exc})") from None
    except OSError as exc:  # a path the file system refuses (a name too long, no permission to look)
        raise RecordCommandError(f"cannot use {exc.filename or 'the path given'}: {exc.strerror}") from None


def _readable(path: str, *, folder_ok: bool = False) -> Path:
    """A path the user named, refused in one line (exit 2) before it is opened when it is
    missing or not a regular file (``common.user_files``: a FIFO would wait forever)."""
    from common.user_files import regular_file

    return regular_file(path, RecordCommandError, folder_ok=folder_ok)


def _repository():
    from ehr_db.repository import EhrRepository

    return EhrRepository(locations.ehr_db_path())


def cmd_audit_verify(args) -> int:
    backups = tuple(_readable(p, folder_ok=True) for p in args.backups or ())
    with _edge():
        verdict = _repository().verify_audit(backups)
    if args.json:
        print(json.dumps(verdict.to_json(), indent=2))
    else:
        print(verdict.summary())
        for note in verdict.notes:
            print(f"  note: {note}")
    return 0 if verdict.ok else 1


def _safety_words(entry: dict) -> str:
    """A safety report's audit entry in a few words: findings by severity (the kinds of the high
    ones), how many were not kept, and the override reason."""
    from appliance.safety.report import SEVERITIES

    findings = [f for f in entry.get("findings") or [] if isinstance(f, dict)]
    tally = []
    for severity in SEVERITIES:
        found = [f for f in findings if f.get("severity") == severity]
        if found:
            kinds = f" ({', '.join(sorted({str(f.get('kind')) for f in found}))})" if severity == "high" else ""
            tally.append(f"{len(found)} {severity}{kinds}")
    words = ", ".join(tally) or "no findings"
    if entry.get("findings_omitted"):
        words += f", {entry['findings_omitted']} more not kept"
    if entry.get("override_reason"):
        words += f"; override reason: {json.dumps(entry['override_reason'])}"
    return words


def _approval_words(approval: dict) -> str:
    """A write's approval: approved or OVERRIDE, by whom, and its safety report."""
    decision = "OVERRIDE" if approval.get("decision") == "override" else "approved"
    words = f"{decision} by {approval.get('clinician') or 'no one named'}"
    safety = approval.get("safety")
    return words + (f"; safety: {_safety_words(safety)}" if isinstance(safety, dict) else "")


def _field(key: str, value) -> str:
    if key == "approval" and isinstance(value, dict):
        return _approval_words(value)
    if key == "rows" and isinstance(value, dict):  # the row digests this event recorded (ehr_db.custody)
        return f"row digests={value.get('n')}"
    if key == "accepted_changes" and isinstance(value, list):
        return f"accepted changes={len(value)}"
    if key == "details" and isinstance(value, dict) and isinstance(value.get("safety"), dict):
        value = {**value, "safety": _safety_words(value["safety"])}
    return f"{key}={json.dumps(value) if isinstance(value, (dict, list)) else value}"


def _fields(text: str | None) -> str:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return text or ""
    if isinstance(value, dict):
        value.pop("patient_id", None)
        last = value.pop("approval", None)  # after the record id it approved
        return ", ".join([_field(k, v) for k, v in value.items()] + ([_field("approval", last)] if last else []))
    return "" if value is None else str(value)


def cmd_audit_show(args) -> int:
    repo = _repository()
    with _edge():
        rows = repo.audit_trail(args.patient)
        verdict = repo.verify_audit()
        reads = repo.read_trail(args.patient)  # who read the chart (or listed the patient in a search)
    if args.json:
        print(json.dumps({"patient_id": args.patient.strip(), "chain_ok": verdict.ok,
                          "first_bad": verdict.to_json()["first_bad"], "rows": rows, "reads": reads}, indent=2))
        return 0
    chain = "chain verified" if verdict.ok else f"CHAIN BROKEN: {verdict.first_bad.describe()}"
    print(f"audit trail of patient {args.patient.strip()}: {len(rows)} row(s) ({chain})")
    for r in rows:
        result = _fields(r["result"])
        print(f"  #{r['seq']}  {r['at']}  {r['actor']}  {r['tool']}  {r['outcome']}  {_fields(r['arguments'])}"
              + (f"  -> {result}" if result else ""))
    if reads:
        print(f"reads of patient {args.patient.strip()}: {len(reads)}")
    for r in reads:
        where = f"  terminal {r['terminal']}" if r["terminal"] else ""
        print(f"  {r['at']}  {r['actor']}  {r['tool']}{where}")
    return 0


def cmd_ehr_backup(args) -> int:
    from ehr_db.backup import backup, verify_backup

    if args.verify:
        with _edge():
            check = verify_backup(_readable(args.path, folder_ok=True))
        print_report(check, args.json)
        return 0 if check.ok else 1
    with _edge():
        report = backup(locations.ehr_db_path(), Path(args.path))
    print_report(report, args.json)
    return 0 if report.audit is None or report.audit.ok else 1  # written, but its chain did not verify


def cmd_ehr_import(args) -> int:
    """``ehr import``: as every import (``appliance.setup.importers``), and an import that would change
    what clinicians rely on prints each difference (stdout) and stops unless --accept-changes."""
    from appliance.setup.importers import ImportFailed, run_import
    from ehr_db.errors import ImportNeedsAcceptance

    try:
        report = run_import("ehr", "fhir", Path(args.path), accept_changes=args.accept_changes)
    except ImportFailed as exc:
        cause = exc.cause
        if isinstance(cause, ImportNeedsAcceptance):
            changes = [difference.describe() for difference in cause.differences]
            if args.json:
                print(json.dumps({"imported": False, "would_change": changes}, indent=2))
            else:
                print(f"the import of {args.path} stopped before writing; it would change:")
                print("\n".join(f"  {change}" for change in changes))
        raise
    print_report(report, args.json)
    if report.skipped and not (report.created or report.updated or report.unchanged):
        raise RecordCommandError(f"nothing was imported from {args.path}: every resource in it was skipped "
                                 "(the reasons are listed above)")
    return 0


def cmd_ehr_restore(args) -> int:
    from common.operator import operator_name
    from ehr_db.backup import restore

    path = locations.ehr_db_path()
    locations.private_dir(path.parent)
    with _edge():
        report = restore(path, _readable(args.path), actor=operator_name())
    print_report(report, args.json)
    return 0


def cmd_ehr_export(args) -> int:
    """``ehr export``: the signed FHIR R4 transaction Bundle of the appliance's writes (``ehr_db.fhir_export``)."""
    from common.progress import ProgressBar
    from ehr_db.fhir_export import export_bundle

    bar = ProgressBar()
    try:
        with _edge():
            report = export_bundle(locations.ehr_db_path(), Path(args.out), locations.export_key_path(),
                                   locations.export_cursor_path(), since=args.since, since_export=args.since_export,
                                   patient=args.patient.strip() if args.patient else None,
                                   progress=lambda done, total: bar.show("exporting writes", done, total))
    finally:
        bar.close()
    print_report(report, args.json)
    return 0


def cmd_ehr_export_key(args) -> int:
    """``ehr export-key``: the public key a receiving site checks exports with (PEM on stdout, or FILE)."""
    from ehr_db import signing

    path = locations.export_public_key_path()
    if not path.exists():
        raise RecordCommandError("there is no export signing key in the data home; run `appliance init` to make it")
    with _edge():
        key = signing.load_public(path)
        pem = signing.public_pem(key).decode("ascii")
        if args.out:
            out = Path(args.out)
            if out.exists():
                raise RecordCommandError(f"{out} already exists; choose a new name")
            out.write_text(pem, encoding="ascii")
    found = {"algorithm": "Ed25519", "fingerprint": signing.fingerprint(key), "public_key_pem": pem,
             "written_to": args.out}
    if args.json:
        print(json.dumps(found, indent=2))
    elif args.out:
        print(f"export public key written to {args.out} (Ed25519, fingerprint {found['fingerprint']})")
    else:
        print(pem, end="")
        print(f"fingerprint (sha256 of the raw key): {found['fingerprint']}", file=sys.stderr)
    return 0


def cmd_ehr_verify_export(args) -> int:
    """``ehr verify-export``: the file against its manifest and signature; exit 1 naming the problem."""
    from ehr_db.fhir_export import verify_export

    key = Path(args.key) if args.key else locations.export_public_key_path()
    with _edge():
        check = verify_export(_readable(args.path), _readable(str(key)) if args.key else key)
    print_report(check, args.json)
    return 0 if check.ok else 1


def cmd_import(args) -> int:
    from appliance.setup.importers import run_import

    print_report(run_import(args.area, args.kind, Path(args.path), replace=getattr(args, "replace", False)), args.json)
    return 0


def register(tree: Tree) -> None:
    """``ehr``, ``umls`` and ``knowledge`` (each with ``import``; the record also ``backup`` and
    ``restore``), and ``audit``."""
    for area, kinds in (("ehr", ("fhir",)), ("umls", ("rrf",)), ("knowledge", ("openfda", "pubmed", "ctgov"))):
        group = tree.group(area, f"{area} data")
        imp = group.command("import", f"import {'/'.join(kinds)} data", cmd_ehr_import if area == "ehr" else cmd_import,
                            area=area)
        if len(kinds) > 1:
            imp.add_argument("kind", choices=kinds)
        else:
            imp.set_defaults(kind=kinds[0])
        imp.add_argument("path")
        options.json_output(imp, "print the import's report as one JSON object")
        if area == "ehr":
            imp.add_argument("--accept-changes", action="store_true",
                             help="apply changes to a patient's identity, an allergy or an active medication (each is "
                                  "printed, and audited with before and after)")
        else:  # these importers replace or prune a store's content
            imp.add_argument("--replace", action="store_true",
                             help="accept a result that shrinks the store by more than the safety threshold")
    ehr = tree.group("ehr", "ehr data")
    backup = ehr.command("backup", "copy the record to PATH (a file, or a folder) through SQLite's backup API, with a "
                                   "manifest beside it", cmd_ehr_backup)
    backup.add_argument("path")
    options.json_output(backup, "print the backup's (or the check's) report as one JSON object")
    backup.add_argument("--verify", action="store_true",
                        help="check the backup at PATH against its manifest (hash, integrity, chain, row digests) "
                             "without restoring it")
    restore = ehr.command("restore", "replace the record with a checked backup (the old one is kept)", cmd_ehr_restore)
    restore.add_argument("path")
    options.json_output(restore, "print the restore's report as one JSON object")
    export = ehr.command("export", "write what the appliance wrote (orders, allergies, notes, with provenance) as a "
                                   "signed FHIR R4 transaction Bundle", cmd_ehr_export)
    export.add_argument("out", metavar="OUT", help="a new file, or a folder to write ehr-export-<time>.json in")
    window = export.add_mutually_exclusive_group()
    window.add_argument("--since", metavar="DATE", help="only writes at or after DATE (YYYY-MM-DD or an ISO time; UTC)")
    window.add_argument("--since-export", action="store_true",
                        help="only writes after the last export of everything (the cursor in the data home)")
    options.patient(export, "only this patient's writes (the cursor does not move)", metavar="ID")
    options.json_output(export, "print the export's report as one JSON object")
    export_key = ehr.command("export-key", "print the public key a receiving site checks exports with",
                             cmd_ehr_export_key)
    export_key.add_argument("out", metavar="FILE", nargs="?", help="write the PEM to FILE (a new file) instead of "
                                                                   "stdout")
    options.json_output(export_key, "print the key, its fingerprint and algorithm as one JSON object")
    verify_export = ehr.command("verify-export", "check an export against its manifest and signature; exit 1 "
                                                 "naming the problem", cmd_ehr_verify_export)
    verify_export.add_argument("path", metavar="FILE")
    verify_export.add_argument("--key", metavar="PEM", help="the sending site's public key (default: this data "
                                                            "home's own)")
    options.json_output(verify_export, "print the check as one JSON object")

    audit = tree.group("audit", "the record's tamper-evident audit log")
    verify = audit.command("verify", "check the hash chain, every clinical row's digest and the copies of the chain "
                                     "head; exit 1 naming each problem", cmd_audit_verify)
    options.json_output(verify)
    verify.add_argument("--backups", action="append", metavar="PATH",
                        help="also compare the head with the manifests of these backups (a backup, a manifest or "
                             "a folder of them; repeatable): catches a whole data home rolled back")
    show = audit.command("show", "one patient's audit rows (writes, approvals, rejections, ...)", cmd_audit_show)
    options.patient(show, "the patient whose rows to show", required=True, metavar="ID")
    options.json_output(show)


