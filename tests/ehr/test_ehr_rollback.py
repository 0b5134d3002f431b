"""Rollback shows (``ehr_db.heads``): the chain head is kept in the anchor file, the accounts and
sessions databases and every backup's manifest; `audit verify`, `appliance init` and the EHR
server's start say when the record is older than a head seen anywhere. A legitimate restore is
not a rollback. Every copy rolled back together cannot be seen (README)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from appliance.accounts import AccountStore
from appliance.accounts.sessions import SessionStore
from appliance.cli import main
from ehr_db import audit
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database

HOME_FILES = ("ehr.sqlite", "ehr.sqlite.audit-head", "accounts.sqlite", "sessions.sqlite")


@pytest.fixture
def home(appliance_home) -> Path:
    """A data home as `appliance init` leaves it (the head keepers first), plus one write."""
    AccountStore(appliance_home / "accounts.sqlite").prepare()
    SessionStore(appliance_home / "sessions.sqlite")
    ensure_database(appliance_home / "ehr.sqlite")
    write(appliance_home)
    return appliance_home


def write(home: Path, n: int = 1) -> None:
    repo = EhrRepository(home / "ehr.sqlite")
    for _ in range(n):
        repo.add_allergy("abc-123", "latex", "rash", "mild", author="dr.a")


def snapshot(home: Path, dest: Path, names=HOME_FILES) -> Path:
    """Copy files of the data home as someone with a shell would (the record checkpointed first)."""
    dest.mkdir()
    for name in names:
        if name.endswith(".sqlite"):
            conn = sqlite3.connect(home / name)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
        shutil.copy2(home / name, dest / name)
    return dest


def put_back(saved: Path, home: Path, names) -> None:
    for name in names:
        for suffix in ("-wal", "-shm"):
            Path(f"{home / name}{suffix}").unlink(missing_ok=True)
        shutil.copy2(saved / name, home / name)


def verify(capsys, *extra) -> tuple[int, str]:
    code = main(["audit", "verify", *extra])
    return code, capsys.readouterr().out


def test_every_write_moves_the_head_in_each_keeper(home):
    write(home, 2)
    verdict = EhrRepository(home / "ehr.sqlite").verify_audit()
    assert verdict.ok
    for kept in (AccountStore(home / "accounts.sqlite").record_heads(), SessionStore(home / "sessions.sqlite").record_heads()):
        assert [(h["seq"], h["hash"]) for h in kept] == [(verdict.head_seq, verdict.head_hash)]
    assert json.loads(audit.anchor_path(home / "ehr.sqlite").read_text())["seq"] == verdict.head_seq
    assert AccountStore(home / "accounts.sqlite").exists() is False  # a head is not an account


@pytest.mark.parametrize("rolled_back,caught_by", [
    (("ehr.sqlite",), ["the anchor file records seq", "older than the head kept in accounts.sqlite",
                       "older than the head kept in sessions.sqlite"]),
    (("ehr.sqlite", "ehr.sqlite.audit-head"), ["older than the head kept in accounts.sqlite",
                                               "older than the head kept in sessions.sqlite"]),
], ids=["record-alone", "record-and-anchor"])
def test_a_rolled_back_record_is_named_even_after_new_writes(home, tmp_path, capsys, rolled_back, caught_by):
    saved = snapshot(home, tmp_path / "old")
    write(home, 3)
    put_back(saved, home, rolled_back)
    code, out = verify(capsys)
    assert code == 1 and all(words in out for words in caught_by), out
    write(home, 5)  # the rolled-back record moves past the head the copies kept: they stay as evidence
    code, out = verify(capsys)
    assert code == 1 and "differs from the head kept in accounts.sqlite" in out, out


def test_an_older_record_with_its_anchor_deleted_is_named(home, tmp_path, capsys):
    saved = snapshot(home, tmp_path / "old")
    write(home)
    put_back(saved, home, ("ehr.sqlite",))
    audit.anchor_path(home / "ehr.sqlite").unlink()
    code, out = verify(capsys)
    assert code == 1 and "older than the head kept in accounts.sqlite" in out


def test_start_up_says_the_record_is_older(home, tmp_path, capsys):
    from mcp_servers.ehr import server as ehr

    saved = snapshot(home, tmp_path / "old")
    write(home)
    put_back(saved, home, ("ehr.sqlite", "ehr.sqlite.audit-head"))
    ehr._configure_and_check(home / "ehr.sqlite")
    ehr.configure(None)
    err = capsys.readouterr().err
    assert err.count("ehr server: WARNING: ") == 2 and "older than the head kept in accounts.sqlite" in err
    assert main(["init", "--no-model"]) == 0
    out = capsys.readouterr().out
    assert "EHR: WARNING: seq" in out and "older than the head kept in sessions.sqlite" in out
    assert verify(capsys)[0] == 1  # init kept the evidence: it did not move the copies to the old record


def test_the_whole_data_home_rolled_back_needs_a_later_backup_to_show(home, tmp_path, capsys):
    saved = snapshot(home, tmp_path / "old")
    write(home)
    backups = tmp_path / "backups"
    backups.mkdir()
    assert main(["ehr", "backup", str(backups)]) == 0
    capsys.readouterr()
    put_back(saved, home, HOME_FILES)
    code, out = verify(capsys)
    assert code == 0  # every copy in the data home rolled back together: the documented blind spot
    code, out = verify(capsys, "--backups", str(backups))
    assert code == 1 and "the record is older than the head kept in backup manifest ehr-" in out, out


def test_a_restore_is_not_a_rollback(home, tmp_path, capsys):
    backups = tmp_path / "backups"
    backups.mkdir()
    assert main(["ehr", "backup", str(backups / "early.sqlite")]) == 0
    write(home, 3)
    assert main(["ehr", "backup", str(backups / "late.sqlite")]) == 0
    assert main(["ehr", "restore", str(backups / "early.sqlite")]) == 0
    capsys.readouterr()
    code, out = verify(capsys, "--backups", str(backups))
    assert code == 0, out  # late.sqlite's head is of the timeline the restore replaced
    restore = [r for r in EhrRepository(home / "ehr.sqlite").audit_trail("abc-123")]  # patient rows only
    assert all(r["tool"] != "restore" for r in restore)
    details = json.loads(sqlite3.connect(home / "ehr.sqlite").execute(
        "SELECT arguments FROM audit_log WHERE tool = 'restore'").fetchone()[0])["details"]
    assert details["replaced_head"]["seq"] == 5  # demo load, write, three writes
    write(home)
    assert verify(capsys, "--backups", str(backups))[0] == 0
    # Rolled back to the restored copy, after writes on the new timeline: shown.
    saved = snapshot(home, tmp_path / "after-restore")
    write(home, 2)
    assert main(["ehr", "backup", str(backups / "newest.sqlite")]) == 0
    capsys.readouterr()
    put_back(saved, home, HOME_FILES)
    code, out = verify(capsys, "--backups", str(backups))
    assert code == 1 and "older than the head kept in backup manifest newest.sqlite.manifest.json" in out, out
