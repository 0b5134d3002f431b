"""The export is signed and written whole: `ehr verify-export` passes a good file and names one
changed byte, a changed manifest, a wrong key or a missing signature (exit 1, one line); a
failure mid-export leaves no file; `appliance init` makes the key (0600) once; export-key."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest

from appliance.cli import main
from ehr_db import signing
from ehr_db.fhir_export import export_bundle, verify_export
from tests.ehr.export_helpers import afternoon, make_home


@pytest.fixture
def exported(appliance_home, tmp_path, capsys):
    afternoon(make_home(appliance_home))
    out = tmp_path / "out.json"
    assert main(["ehr", "export", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["writes"] == 6 and report["cursor_advanced"] is True
    return out


def verify(capsys, *argv) -> tuple[int, str]:
    code = main(["ehr", "verify-export", *map(str, argv)])
    out, err = capsys.readouterr()
    assert not err
    return code, out


def test_a_good_export_verifies(exported, capsys):
    code, out = verify(capsys, exported)
    assert code == 0 and "verified" in out
    code, out = verify(capsys, exported, "--json")
    assert code == 0 and json.loads(out)["ok"] is True and json.loads(out)["writes"] == 6


@pytest.mark.parametrize("offset", [0, 100, -2])
def test_one_changed_byte_fails(exported, capsys, offset):
    data = bytearray(exported.read_bytes())
    data[offset] ^= 0x01
    exported.write_bytes(bytes(data))
    code, out = verify(capsys, exported)
    assert code == 1 and len(out.strip().splitlines()) == 1
    assert "does NOT verify" in out and "does not match its manifest" in out


def test_a_changed_file_with_its_manifest_rewritten_fails_on_the_signature(exported, capsys):
    data = exported.read_bytes().replace(b'"stopped"', b'"active"', 1)
    exported.write_bytes(data)
    manifest_path = signing.manifest_path(exported)
    manifest = json.loads(manifest_path.read_text())
    manifest.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    manifest_path.write_text(json.dumps(manifest))
    code, out = verify(capsys, exported)
    assert code == 1 and "the signature does not verify" in out


def test_a_changed_manifest_fails(exported, capsys):
    manifest_path = signing.manifest_path(exported)
    manifest = json.loads(manifest_path.read_text())
    manifest["sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    code, out = verify(capsys, exported, "--json")
    assert code == 1 and "does not match its manifest" in json.loads(out)["problem"]
    manifest_path.write_text("{not json")
    code, out = verify(capsys, exported)
    assert code == 1 and "cannot be read as JSON" in out


def test_the_wrong_key_fails(exported, tmp_path, capsys):
    signing.ensure_key(tmp_path / "other.key", tmp_path / "other.pub")
    code, out = verify(capsys, exported, "--key", tmp_path / "other.pub")
    assert code == 1 and "names signing key" in out
    # a manifest edited to name the other key: the signature still says who signed
    manifest_path = signing.manifest_path(exported)
    manifest = json.loads(manifest_path.read_text())
    manifest["signature"]["key_fingerprint"] = signing.fingerprint(signing.load_public(tmp_path / "other.pub"))
    manifest_path.write_text(json.dumps(manifest))
    code, out = verify(capsys, exported, "--key", tmp_path / "other.pub")
    assert code == 1 and "the signature does not verify" in out


def test_a_missing_signature_fails(exported, capsys):
    signing.signature_path(exported).unlink()
    code, out = verify(capsys, exported)
    assert code == 1 and "out.json.sig is missing" in out


def test_the_receiving_side_checks_with_the_exported_public_key(exported, tmp_path, capsys):
    key_file = tmp_path / "site.pub"
    assert main(["ehr", "export-key", str(key_file)]) == 0
    capsys.readouterr()
    assert main(["ehr", "export-key", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["public_key_pem"] == key_file.read_text()
    assert verify_export(exported, key_file).ok
    assert verify_export(exported, key_file).key_fingerprint == shown["fingerprint"]


def test_an_export_never_overwrites(exported, capsys):
    before = exported.read_bytes()
    assert main(["ehr", "export", str(exported)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert exported.read_bytes() == before


def test_a_failure_at_the_last_rename_leaves_nothing(appliance_home, tmp_path, monkeypatch):
    path = make_home(appliance_home)
    afternoon(path)
    out = tmp_path / "out.json"
    real = os.replace

    def fail_on_the_bundle(src, dst):
        if str(dst) == str(out):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(signing.os, "replace", fail_on_the_bundle)
    with pytest.raises(OSError):
        export_bundle(path, out, appliance_home / "export-signing.key", appliance_home / "export-cursor.json")
    assert list(tmp_path.iterdir()) == [appliance_home]  # no bundle, signature, manifest or temporary file
    assert not (appliance_home / "export-cursor.json").exists()


def test_a_failure_while_writing_leaves_nothing_and_the_cli_says_one_line(appliance_home, tmp_path, monkeypatch,
                                                                         capsys):
    afternoon(make_home(appliance_home))
    out = tmp_path / "out.json"

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", str(out))

    monkeypatch.setattr(signing, "_fsync_dir", full)
    assert main(["ehr", "export", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "No space left" in err
    assert list(tmp_path.iterdir()) == [appliance_home]


def test_init_makes_the_key_once_and_private(appliance_home, capsys):
    assert main(["init", "--no-model"]) == 0
    key = appliance_home / "export-signing.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    first = key.read_bytes()
    assert main(["init", "--no-model", "--json"]) == 0
    assert key.read_bytes() == first
    assert "export signing key: present" in capsys.readouterr().out


def test_a_key_others_may_read_is_refused(appliance_home, tmp_path, capsys):
    make_home(appliance_home)
    os.chmod(appliance_home / "export-signing.key", 0o644)
    assert main(["ehr", "export", str(tmp_path / "out.json")]) == 2
    assert "may be read by others" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_a_folder_gets_a_named_export_and_the_cursor_follows(appliance_home, tmp_path, capsys):
    afternoon(make_home(appliance_home))
    usb = tmp_path / "usb"
    usb.mkdir()
    assert main(["ehr", "export", str(usb), "--since-export", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["writes"] == 6 and first["path"].startswith(str(usb / "ehr-export-"))
    assert main(["ehr", "verify-export", first["path"]]) == 0
    capsys.readouterr()
    again = tmp_path / "again.json"
    assert main(["ehr", "export", str(again), "--since-export", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["writes"] == 0
