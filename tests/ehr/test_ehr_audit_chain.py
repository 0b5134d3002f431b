"""The hash-chained audit log: an untouched database verifies; editing, deleting, reordering or
truncating rows with sqlite3 directly (after dropping the triggers) is caught by `appliance
audit verify`, which exits 1 and names the first bad row."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
from ehr_helpers import call
from sqlite_utils import Database

from appliance.cli import main
from common import sqlite as common_sqlite
from ehr_db import audit
from ehr_db.errors import InvalidField
from ehr_db.migrations import MIGRATIONS, migrate
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database

TRIGGERS = ("audit_log_no_update", "audit_log_no_delete", "audit_log_chained", "audit_log_head", "audit_head_forward")


@pytest.fixture
def home_db(appliance_home):
    """The data home's EHR with the demo load (seq 1), three writes and one event (seq 2-5)."""
    path = appliance_home / "ehr.sqlite"
    ensure_database(path)
    repo = EhrRepository(path)
    repo.prescribe_medication("abc-123", "lisinopril", "10 mg", "once daily", author="dr.a")
    repo.add_allergy("abc-123", "penicillin", "hives", "mild", author="dr.a")
    repo.record_event("approval", "abc-123", "dr.a", {"tool": "save_clinical_note"})
    repo.save_clinical_note("abc-123", "progress", "Doing well.", author="dr.a")
    return path


def tamper(path, *statements: str) -> None:
    """What someone with the file and the sqlite3 shell can do: drop the triggers, then edit."""
    conn = sqlite3.connect(path)
    for trigger in TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def verify(capsys) -> tuple[int, str]:
    code = main(["audit", "verify"])
    return code, capsys.readouterr().out


def test_an_untouched_database_verifies(home_db, capsys):
    code, out = verify(capsys)
    assert code == 0
    assert out.startswith("audit chain verified: 5 rows, head seq 5")
    assert main(["audit", "verify", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["rows"] == 5 and report["anchor"]["seq"] == 5


def test_rows_are_chained_in_order(home_db):
    rows = [dict(r) for r in Database(home_db).query("SELECT * FROM audit_log ORDER BY id")]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0]["prev_hash"] == audit.GENESIS
    for before, row in zip(rows, rows[1:]):
        assert row["prev_hash"] == before["row_hash"]
        assert row["row_hash"] == audit.row_hash(row, row["prev_hash"])


@pytest.mark.parametrize("statements,named", [
    (["UPDATE audit_log SET actor = 'mallory' WHERE id = 3"], "row id 3 (seq 3): its content does not match"),
    (["UPDATE audit_log SET arguments = replace(arguments, '10 mg', '100 mg') WHERE id = 2"],
     "row id 2 (seq 2): its content does not match"),
    (["UPDATE audit_log SET at = '2020-01-01T00:00:00+00:00' WHERE id = 4"], "row id 4 (seq 4)"),
    (["DELETE FROM audit_log WHERE id = 3"], "row id 4 (seq 4): expected seq 3 here"),
    (["UPDATE audit_log SET id = 100 WHERE id = 2", "UPDATE audit_log SET id = 2 WHERE id = 3",
      "UPDATE audit_log SET id = 3 WHERE id = 100"], "row id 2 (seq 3): expected seq 2 here"),
    (["DELETE FROM audit_log WHERE id = 5"], "seq 5: missing: the log ends at seq 4"),
    (["DELETE FROM audit_log WHERE id >= 4", "UPDATE audit_head SET seq = 3, "
      "hash = (SELECT row_hash FROM audit_log WHERE seq = 3)"], "seq 4: missing: the anchor file records seq 5"),
], ids=["edit-actor", "edit-arguments", "edit-time", "delete-middle", "swap-ids", "truncate-tail",
        "truncate-tail-and-head"])
def test_tampering_is_named_at_the_first_bad_row(home_db, capsys, statements, named):
    tamper(home_db, *statements)
    code, out = verify(capsys)
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith("audit chain BROKEN at ") and named in first, out
    assert "protective triggers were removed" in out


def test_a_recomputed_chain_is_caught_by_the_anchor_file(home_db, capsys):
    # Rewrite row 2 and recompute every hash after it: the database alone looks consistent.
    tamper(home_db, "UPDATE audit_log SET actor = 'mallory' WHERE id = 2")
    db = Database(home_db)
    prev = db.execute("SELECT row_hash FROM audit_log WHERE seq = 1").fetchone()[0]
    for row in list(db.query("SELECT * FROM audit_log WHERE seq >= 2 ORDER BY id")):
        digest = audit.row_hash(row, prev)
        db.execute("UPDATE audit_log SET prev_hash = ?, row_hash = ? WHERE id = ?", [prev, digest, row["id"]])
        prev = digest
    db.execute("UPDATE audit_head SET hash = ?", [prev])
    db.conn.commit()
    db.close()
    code, out = verify(capsys)
    assert code == 1 and "seq 5: its hash differs from the anchor file's" in out
    # What is not detectable (the module docstring says so): the same rewrite with the anchor
    # file deleted, apart from the restored triggers' absence.
    audit.anchor_path(home_db).unlink()
    verdict = EhrRepository(home_db).verify_audit()
    assert [p.reason for p in verdict.problems] == [
        "the audit log's protective triggers were removed (audit_log_no_update, audit_log_no_delete, "
        "audit_log_chained, audit_log_head, audit_head_forward)"]
    assert "no anchor file" in verdict.notes[0]


def test_a_row_inserted_beside_the_chain_is_caught(home_db, capsys):
    tamper(home_db, "INSERT INTO audit_log (at, actor, tool, arguments, outcome) "
                    "VALUES ('2026-01-01', 'x', 'prescribe_medication', '{\"patient_id\": \"abc-123\"}', 'success')")
    code, out = verify(capsys)
    assert code == 1 and "row id 6 (seq None): its content does not match its hash" in out


def test_verify_without_a_database_is_one_line_and_exit_2(appliance_home, capsys):
    assert main(["audit", "verify"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("appliance: ") and len(err.strip().splitlines()) == 1


def test_the_migration_chains_rows_written_before_it(tmp_path):
    path = tmp_path / "old.sqlite"
    db = common_sqlite.connect(path)
    common_sqlite.migrate(db, "ehr", MIGRATIONS[:3])  # the schema before the chain
    for n in range(3):
        db["audit_log"].insert({"at": f"2026-01-0{n + 1}", "actor": "a", "tool": "t", "arguments": "{}",
                                "outcome": "success"})
    assert migrate(db) == [fn.__name__ for fn in MIGRATIONS[3:]]
    verdict = audit.verify(db)
    assert verdict.ok and verdict.rows == 3 and verdict.head_seq == 3
    db.close()


# -- events ------------------------------------------------------------------------------------
def test_events_join_the_chain_and_the_patients_trail(home_db, capsys):
    repo = EhrRepository(home_db)
    seq = repo.record_event("safety_findings", "abc-123", "dr.b", {"findings": [{"severity": "high"}]})
    repo.record_event("override", "abc-123", "dr.b", {"reason": "benefit outweighs risk"})
    repo.record_event("rejection", "pat-002", "dr.b", {"tool": "add_allergy", "reason": "wrong patient"})
    assert seq == 6 and repo.verify_audit().ok
    assert main(["audit", "show", "--patient", "abc-123"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "audit trail of patient abc-123: 6 row(s) (chain verified)"
    assert [line.split()[3] for line in out[1:]] == [
        "prescribe_medication", "add_allergy", "approval", "save_clinical_note", "safety_findings", "override"]
    assert "medication_name=lisinopril" in out[1] and 'details={"reason": "benefit outweighs risk"}' in out[6]
    assert main(["audit", "show", "--patient", "pat-002", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["chain_ok"] is True and [r["tool"] for r in shown["rows"]] == ["rejection"]


@pytest.mark.parametrize("kind,patient,actor,details,field", [
    ("deletion", "abc-123", "dr", {}, "kind"),
    ("approval", "abc 123", "dr", {}, "patient_id"),
    ("approval", "abc-123", " \u200b", {}, "actor"),
    ("approval", "abc-123", "dr", ["not", "an", "object"], "details"),
    ("approval", "abc-123", "dr", {"x": "y" * 30000}, "details"),
    ("approval", "abc-123", "dr", {"x": object()}, "details"),
])
def test_bad_events_are_refused_and_change_nothing(home_db, kind, patient, actor, details, field):
    repo = EhrRepository(home_db)
    with pytest.raises(InvalidField) as exc:
        repo.record_event(kind, patient, actor, details)
    assert exc.value.field == field
    assert repo.verify_audit().rows == 5


def test_the_server_records_events_for_the_agent(home_db, monkeypatch):
    from mcp_servers.ehr import server as ehr

    monkeypatch.setenv("APPLIANCE_USER", "dr.server")
    ehr.configure(home_db)
    try:
        assert call(ehr.mcp, ehr.AUDIT_EVENT_TOOL, {
            "kind": "rejection", "patient_id": "abc-123", "details": {"tool": "prescribe_medication", "clinician": None, "reason": None, "safety": None}}) == {
            "seq": 6, "kind": "rejection"}
    finally:
        ehr.configure(None)
    last = EhrRepository(home_db).audit_trail("abc-123")[-1]
    assert (last["actor"], last["tool"]) == ("dr.server", "rejection")


def test_a_write_and_its_audit_row_carry_one_time_read_under_the_lock(home_db, monkeypatch):
    """The time is read once, after BEGIN IMMEDIATE (a write waiting for the lock up to the busy
    timeout used to keep the time it was asked at, seconds away from its audit row)."""
    import ehr_db.repository as repository

    events: list[str] = []
    real_transaction = repository.write_transaction

    def transaction(db):
        events.append("begin")
        return real_transaction(db)

    def clock():
        events.append("clock")
        return f"2026-06-01T00:00:0{events.count('clock')}+00:00"

    monkeypatch.setattr(repository, "write_transaction", transaction)
    monkeypatch.setattr(repository, "now_iso", clock)
    new_id = EhrRepository(home_db).prescribe_medication("abc-123", "amlodipine", "5 mg", "once daily", author="dr")
    assert events == ["begin", "clock"]
    db = Database(home_db)
    authored = db.execute("SELECT authored_at FROM medication_requests WHERE id = ?", [new_id]).fetchone()[0]
    assert authored == db.execute("SELECT at FROM audit_log WHERE seq = 6").fetchone()[0] == "2026-06-01T00:00:01+00:00"


def test_the_anchor_file_is_private_and_follows_each_write(home_db):
    anchor = audit.anchor_path(home_db)
    assert oct(anchor.stat().st_mode & 0o777) == "0o600"
    assert json.loads(anchor.read_text())["seq"] == 5
    EhrRepository(home_db).record_event("approval", None, "dr", {})
    assert json.loads(anchor.read_text())["seq"] == 6


def test_a_copy_of_the_database_verifies_on_its_own(home_db, tmp_path):
    copy = tmp_path / "copy.sqlite"
    shutil.copy(home_db, copy)
    assert EhrRepository(copy).verify_audit().ok  # no anchor beside it: noted, not a failure


def test_dropped_triggers_alone_fail_verification(home_db, capsys):
    tamper(home_db)
    code, out = verify(capsys)
    assert code == 1 and out.startswith("audit chain BROKEN: the audit log's protective triggers were removed")
