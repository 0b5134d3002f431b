"""Files that may hold patient data are 0600 and their folders 0700, whatever the umask."""

from __future__ import annotations

import os
import stat

import pytest

from appliance.accounts.sessions import SessionStore
from appliance.cli import main
from common import sqlite
from common.locations import make_private


def mode(path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


@pytest.fixture
def loose_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_init_makes_the_data_home_private(appliance_home, loose_umask, tmp_path, capsys):
    os.chmod(appliance_home, 0o755)
    assert main(["init", "--no-model"]) == 0
    assert os.umask(0o022) == 0o022  # the command gave the umask back
    assert mode(appliance_home) == mode(appliance_home / "logs") == "0o700"
    for name in ("ehr.sqlite", "umls.sqlite", "knowledge.sqlite", "ehr.sqlite.audit-head", "umls.sqlite.lock"):
        assert mode(appliance_home / name) == "0o600", name
    assert main(["ehr", "backup", str(tmp_path / "b.sqlite")]) == 0
    assert mode(tmp_path / "b.sqlite") == "0o600"


def test_databases_and_their_wal_and_shm_are_created_0600(tmp_path, loose_umask):
    db = sqlite.connect(tmp_path / "x.sqlite")
    db["t"].insert({"a": 1})
    try:
        for name in ("x.sqlite", "x.sqlite-wal", "x.sqlite-shm"):
            assert mode(tmp_path / name) == "0o600", name
    finally:
        db.close()


def test_the_sessions_store_is_private(tmp_path, loose_umask):
    SessionStore(tmp_path / "s" / "sessions.sqlite")
    assert mode(tmp_path / "s" / "sessions.sqlite") == "0o600"


def test_make_private_tightens_what_an_older_version_left(tmp_path):
    os.chmod(tmp_path, 0o755)
    (tmp_path / "exports").mkdir()
    os.chmod(tmp_path / "exports", 0o755)
    (tmp_path / "exports" / "chat.md").write_text("x")
    os.chmod(tmp_path / "exports" / "chat.md", 0o644)
    assert make_private(tmp_path) == 3
    assert mode(tmp_path) == mode(tmp_path / "exports") == "0o700"
    assert mode(tmp_path / "exports" / "chat.md") == "0o600"
    assert make_private(tmp_path) == 0
