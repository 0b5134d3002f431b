"""`appliance ehr backup PATH` / `appliance ehr restore PATH`: checked copies through SQLite's
backup API; a restore refuses damaged, foreign or tampered files and keeps what it replaced."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from ehr_helpers import row_counts
from sqlite_utils import Database

from appliance.cli import main
from ehr_db import audit
from ehr_db.migrations import MIGRATIONS
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database


@pytest.fixture
def live(appliance_home):
    path = appliance_home / "ehr.sqlite"
    ensure_database(path)
    EhrRepository(path).prescribe_medication("abc-123", "lisinopril", "10 mg", "once daily", author="dr.a")
    return path


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_backup_then_restore_brings_the_record_back(live, tmp_path, capsys):
    code, out, _ = run(capsys, "ehr", "backup", str(tmp_path / "b.sqlite"))
    assert code == 0
    assert out.startswith(f"EHR backup written to {tmp_path / 'b.sqlite'}: 24 patients, audit log of 2 rows")
    assert oct((tmp_path / "b.sqlite").stat().st_mode & 0o777) == "0o600"
    assert not (tmp_path / "b.sqlite-wal").exists()  # one self-contained file
    EhrRepository(live).add_allergy("abc-123", "latex", "rash", None, author="dr.a")  # after the backup
    before = row_counts(live)

    code, out, _ = run(capsys, "ehr", "restore", str(tmp_path / "b.sqlite"))
    assert code == 0, out
    assert out.splitlines()[0].startswith(f"EHR restored from {tmp_path / 'b.sqlite'}: 24 patients")
    after = row_counts(live)
    assert after["allergy_intolerances"] == before["allergy_intolerances"] - 1
    kept = sorted(live.parent.glob("ehr.sqlite.replaced-*"))
    assert len(kept) == 1 and row_counts(kept[0])["allergy_intolerances"] == before["allergy_intolerances"]
    assert oct(kept[0].stat().st_mode & 0o777) == "0o600"
    verdict = EhrRepository(live).verify_audit()  # the anchor was reset to the restored head
    assert verdict.ok and verdict.rows == 3
    last = list(Database(live).query("SELECT tool, arguments FROM audit_log ORDER BY id DESC LIMIT 1"))[0]
    assert last["tool"] == "restore" and "b.sqlite" in last["arguments"]
    assert not list(live.parent.glob(".ehr.sqlite.restore-*"))


def test_backup_into_a_folder_names_the_file_and_never_overwrites(live, tmp_path, capsys):
    code, out, _ = run(capsys, "ehr", "backup", str(tmp_path))
    assert code == 0
    made = list(tmp_path.glob("ehr-*.sqlite"))
    assert len(made) == 1
    code, _, err = run(capsys, "ehr", "backup", str(made[0]))
    assert code == 2 and "already exists" in err


def _tampered_backup(path):
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER audit_log_no_update")
    conn.execute("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2")
    conn.commit()
    conn.close()


def _newer(path):
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('ehr', 'm999_future', 'x')")
    conn.commit()
    conn.close()


def _damaged(path):
    with open(path, "r+b") as handle:
        handle.seek(4096 * 3)
        handle.write(b"\xff" * 4096 * 4)


@pytest.mark.parametrize("spoil,words", [
    (lambda p: p.write_text("patient list\n"), "not a readable SQLite database"),
    (_damaged, "fails SQLite's integrity check"),
    (lambda p: (p.unlink(), Database(p)["t"].insert({"a": 1})), "not an EHR database"),
    (_tampered_backup, "audit chain of b.sqlite does not verify (row id 2 (seq 2)"),
    (_newer, "newer version of the appliance (unknown migration m999_future)"),
], ids=["text-file", "damaged", "other-database", "tampered-chain", "newer-version"])
def test_restore_refuses_a_bad_file_and_leaves_the_record_alone(live, tmp_path, capsys, spoil, words):
    assert run(capsys, "ehr", "backup", str(tmp_path / "b.sqlite"))[0] == 0
    spoil(tmp_path / "b.sqlite")
    before, anchor = digest(live), audit.anchor_path(live).read_text()
    code, _, err = run(capsys, "ehr", "restore", str(tmp_path / "b.sqlite"))
    assert code == 2 and words in err and err.count("\n") == 1, err
    assert "it was not restored" in err
    assert digest(live) == before and audit.anchor_path(live).read_text() == anchor
    assert not list(live.parent.glob("ehr.sqlite.replaced-*")) and not list(live.parent.glob(".ehr.sqlite.restore-*"))


def test_restore_replaces_a_damaged_live_database(live, tmp_path, capsys):
    assert run(capsys, "ehr", "backup", str(tmp_path / "b.sqlite"))[0] == 0
    _damaged(live)
    damaged = digest(live)
    code, out, err = run(capsys, "ehr", "restore", str(tmp_path / "b.sqlite"))
    assert code == 0, err
    assert EhrRepository(live).verify_audit().ok
    kept = list(live.parent.glob("ehr.sqlite.replaced-*"))
    assert len(kept) == 1 and digest(kept[0]) == damaged  # kept byte for byte


def test_restore_into_an_empty_home(appliance_home, live, tmp_path, capsys):
    assert run(capsys, "ehr", "backup", str(tmp_path / "b.sqlite"))[0] == 0
    for leftover in appliance_home.glob("ehr.sqlite*"):
        leftover.unlink()
    code, out, _ = run(capsys, "ehr", "restore", str(tmp_path / "b.sqlite"))
    assert code == 0 and "kept as" not in out
    assert row_counts(live)["medication_requests"] > 0 and EhrRepository(live).verify_audit().ok


def test_an_older_backup_is_migrated_on_restore(appliance_home, tmp_path, capsys):
    from common import sqlite as common_sqlite

    old = tmp_path / "old.sqlite"
    db = common_sqlite.connect(old)
    common_sqlite.migrate(db, "ehr", MIGRATIONS[:3])
    db["patients"].insert({"id": "abc-001", "family": "F", "given": "G", "name_key": " g f ", "source": "demo",
                           "updated_at": "2026"})
    db["audit_log"].insert({"at": "2026", "actor": "a", "tool": "t", "arguments": "{}", "outcome": "success"})
    db.close()
    code, out, err = run(capsys, "ehr", "restore", str(old))
    assert code == 0, err
    assert "brought up to date: m004_audit_hash_chain" in out
    verdict = EhrRepository(appliance_home / "ehr.sqlite").verify_audit()
    # its row, its baseline of row digests (m006), the restore
    assert verdict.ok and verdict.rows == 3 and verdict.clinical_rows == 1
    assert any("taken as they stood when row digests were added" in note for note in verdict.notes)


def test_a_backup_of_a_tampered_record_is_written_but_exits_1(live, tmp_path, capsys):
    _tampered_backup(live)
    code, out, _ = run(capsys, "ehr", "backup", str(tmp_path / "evidence.sqlite"))
    assert code == 1 and "chain BROKEN (row id 2 (seq 2)" in out
    assert (tmp_path / "evidence.sqlite").exists()
