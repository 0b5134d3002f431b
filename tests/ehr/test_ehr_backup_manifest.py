"""Backups prove themselves: a manifest beside each backup (whole-file sha256, size, pages, the
chain head, per-table row digests); `ehr restore` refuses a file whose hash, integrity or row
digests disagree, naming what disagrees; `ehr backup --verify PATH` checks without restoring."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from appliance.cli import main
from ehr_db import audit, custody
from ehr_db.backup_manifest import manifest_path
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database


@pytest.fixture
def live(appliance_home):
    path = appliance_home / "ehr.sqlite"
    ensure_database(path)
    EhrRepository(path).prescribe_medication("abc-123", "lisinopril", "10 mg", "once daily", author="dr.a")
    return path


@pytest.fixture
def backup(live, tmp_path, capsys):
    path = tmp_path / "b.sqlite"
    assert main(["ehr", "backup", str(path)]) == 0
    capsys.readouterr()
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def flip(path, offset: int, n: int = 16) -> None:
    data = bytearray(path.read_bytes())
    for i in range(offset, min(offset + n, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_the_manifest_describes_the_backup(live, backup):
    manifest = json.loads(manifest_path(backup).read_text())
    assert oct(manifest_path(backup).stat().st_mode & 0o777) == "0o600"
    assert manifest["sha256"] == digest(backup) and manifest["bytes"] == backup.stat().st_size
    assert manifest["pages"] * manifest["page_size"] == backup.stat().st_size
    verdict = EhrRepository(live).verify_audit()
    assert (manifest["head"]["seq"], manifest["head"]["hash"]) == (verdict.head_seq, verdict.head_hash)
    assert set(manifest["tables"]) == set(custody.TABLES)
    assert manifest["tables"]["medication_requests"]["rows"] > 0


def test_verify_a_good_backup_without_restoring(live, backup, capsys):
    before = digest(live)
    code, out, _ = run(capsys, "ehr", "backup", "--verify", str(backup))
    assert code == 0 and out.startswith(f"backup {backup} verified: the file matches its manifest; integrity ok")
    assert digest(live) == before


def test_verify_names_a_flipped_byte(backup, capsys):
    flip(backup, backup.stat().st_size - 100, 1)
    code, out, _ = run(capsys, "ehr", "backup", "--verify", str(backup))
    assert code == 1 and "does NOT verify" in out and "its sha256 differs from its manifest's" in out


@pytest.mark.parametrize("offset", [16316, 185277], ids=["offset-16316", "offset-185277"])
def test_the_issues_flipped_copies_are_refused(live, backup, capsys, offset):
    if offset >= backup.stat().st_size:
        offset = backup.stat().st_size // 2
    flip(backup, offset)
    before, anchor = digest(live), audit.anchor_path(live).read_text()
    code, _, err = run(capsys, "ehr", "restore", str(backup))
    assert code == 2 and "b.sqlite was refused: its sha256 differs from its manifest's" in err
    assert "it was not restored" in err and err.count("\n") == 1
    assert digest(live) == before and audit.anchor_path(live).read_text() == anchor


def test_a_changed_birth_date_without_a_manifest_is_caught_by_the_row_digests(live, backup, capsys):
    data = bytearray(backup.read_bytes())
    at = data.find(b"1958-03-14")  # John Smith's birth date, in the patients table's page
    assert at > 0
    data[at:at + 10] = b"1999-09-09"
    backup.write_bytes(bytes(data))
    manifest_path(backup).unlink()  # an older backup, or the manifest lost: the row digests still hold
    code, _, err = run(capsys, "ehr", "restore", str(backup))
    assert code == 2 and "patients row abc-123: no longer matches the digest" in err, err


def test_twelve_random_flips_all_refused(live, backup, tmp_path, capsys):
    rng = random.Random(24)
    original = backup.read_bytes()
    refused = 0
    for n in range(12):
        copy = tmp_path / f"flip-{n}.sqlite"
        copy.write_bytes(original)
        manifest_path(copy).write_text(manifest_path(backup).read_text())
        flip(copy, rng.randrange(len(original)))
        code, _, err = run(capsys, "ehr", "restore", str(copy))
        refused += code == 2 and "was refused" in err
    assert refused == 12
    assert EhrRepository(live).verify_audit().ok


def test_a_table_changed_with_a_rehashed_manifest_is_still_named(live, backup, capsys):
    data = bytearray(backup.read_bytes())
    at = data.find(b"1958-03-14")
    data[at:at + 10] = b"1999-09-09"
    backup.write_bytes(bytes(data))
    manifest = json.loads(manifest_path(backup).read_text())
    manifest.update(sha256=digest(backup))  # someone recomputed the file's hash, not the tables'
    manifest_path(backup).write_text(json.dumps(manifest))
    code, out, _ = run(capsys, "ehr", "backup", "--verify", str(backup))
    assert code == 1 and "table patients's rows differ from its manifest's" in out
    assert "patients row abc-123: no longer matches" in out


def test_an_old_backup_without_a_manifest_restores_with_a_note(live, backup, capsys):
    manifest_path(backup).unlink()
    code, out, _ = run(capsys, "ehr", "restore", str(backup))
    assert code == 0 and "note: no manifest beside it" in out


def test_a_backup_never_overwrites_a_manifest(live, backup, capsys):
    backup.unlink()
    code, _, err = run(capsys, "ehr", "backup", str(backup))
    assert code == 2 and "already exists" in err
