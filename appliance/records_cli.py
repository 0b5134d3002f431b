"""``appliance audit verify|show`` and ``appliance ehr backup|restore``: the record's custody.

Invariants:
- Exit codes follow ``appliance.cli``: 0 done, 1 the audit chain does not verify (a check
  failed, as for ``smoke``; a backup is still written, to keep the evidence), 2 an expected failure (no database, a damaged one, a refused
  restore), always one line on stderr and never a traceback.
- ``audit verify`` and ``audit show`` only read. ``show`` prints the audit rows of one
  patient (for review by whoever may read the record) to stdout only; nothing is logged. A
  write's approval (approved or OVERRIDE, by whom) and a safety report (findings by severity,
  the override reason) are shown in a few words; ``--json`` keeps every row whole.
- ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


def _repository():
    from ehr_db.repository import EhrRepository

    return EhrRepository(locations.ehr_db_path())


def cmd_audit_verify(args) -> int:
    with _edge():
        verdict = _repository().verify_audit()
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
    if args.json:
        print(json.dumps({"patient_id": args.patient.strip(), "chain_ok": verdict.ok,
                          "first_bad": verdict.to_json()["first_bad"], "rows": rows}, indent=2))
        return 0
    chain = "chain verified" if verdict.ok else f"CHAIN BROKEN: {verdict.first_bad.describe()}"
    print(f"audit trail of patient {args.patient.strip()}: {len(rows)} row(s) ({chain})")
    for r in rows:
        result = _fields(r["result"])
        print(f"  #{r['seq']}  {r['at']}  {r['actor']}  {r['tool']}  {r['outcome']}  {_fields(r['arguments'])}"
              + (f"  -> {result}" if result else ""))
    return 0


def cmd_ehr_backup(args) -> int:
    from ehr_db.backup import backup

    with _edge():
        report = backup(locations.ehr_db_path(), Path(args.path))
    print(report.summary())
    return 0 if report.audit is None or report.audit.ok else 1  # written, but its chain did not verify


def cmd_ehr_restore(args) -> int:
    from common.operator import operator_name
    from ehr_db.backup import restore

    path = locations.ehr_db_path()
    locations.private_dir(path.parent)
    with _edge():
        report = restore(path, Path(args.path), actor=operator_name())
    print(report.summary())
    return 0


def register_audit(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser("audit", help="the record's tamper-evident audit log")
    asub = audit.add_subparsers(dest="action", required=True)
    verify = asub.add_parser("verify", help="check the hash chain; exit 1 naming the first bad row")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(func=cmd_audit_verify)
    show = asub.add_parser("show", help="one patient's audit rows (writes, approvals, rejections, ...)")
    show.add_argument("--patient", required=True, metavar="ID")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_audit_show)


def register_ehr(asub: argparse._SubParsersAction) -> None:
    backup = asub.add_parser("backup", help="copy the record to PATH (a file, or a folder) through SQLite's backup API")
    backup.add_argument("path")
    backup.set_defaults(func=cmd_ehr_backup)
    restore = asub.add_parser("restore", help="replace the record with a checked backup (the old one is kept)")
    restore.add_argument("path")
    restore.set_defaults(func=cmd_ehr_restore)
