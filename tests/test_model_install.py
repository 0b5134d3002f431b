"""``appliance model install|list`` on the shipped GGUF (installed for its own profile, standing in
for an operator's file): copied, hashed, checked by llama.cpp and against its own metadata,
recorded, verified at start; damaged files, and a model that is not the profile's (the demo
model as MedGemma), refused with the folder left as it was; a file changed behind the hash
cache is hashed again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import namedtuple

import pytest

from appliance.config import Settings
from appliance.errors import ModelFileError
from appliance.llm.llama import check_readable
from appliance.runtime import model_files
from common.locations import PROJECT_ROOT, models_dir
from models.assemble import assemble_default_model
from models.install import REGISTRY, ModelInstallError, install, read_registry
from models.profiles import get_profile
from models.verify import verify_model_file

PRODUCTION = get_profile("medgemma-1.5-4b-it")
DEMO = get_profile("gemma3-270m")  # the shipped file's own profile: what these tests install
SHIPPED_SHA = DEMO.sha256


@pytest.fixture(scope="module")
def gguf():
    return assemble_default_model(models_dir())


@pytest.fixture
def folder(tmp_path, monkeypatch):
    path = tmp_path / "installed"
    monkeypatch.setenv("APPLIANCE_MODELS", str(path))
    return path


def test_an_installed_model_is_recorded_and_found_for_its_profile(gguf, folder):
    entry = install(gguf, DEMO, folder, check=check_readable)
    assert entry.sha256 == SHIPPED_SHA and entry.size == gguf.stat().st_size
    assert read_registry(folder)[DEMO.name] == entry
    assert sorted(p.name for p in folder.iterdir()) == sorted([DEMO.file_name, REGISTRY])
    files = model_files(Settings(model=DEMO.name))
    assert (files.path, files.sha256, files.folder, files.installed) == (folder / DEMO.file_name, SHIPPED_SHA,
                                                                         folder, True)
    verify_model_file(files.path, files.sha256)  # what every start does
    # the operator's own path still wins, and a profile with nothing installed keeps the project's
    assert model_files(Settings(model=DEMO.name, model_path=str(gguf))).installed is False
    assert model_files(Settings(model=PRODUCTION.name)).path == models_dir() / PRODUCTION.file_name


def test_the_demo_model_is_never_installed_under_the_clinical_profile(gguf, folder):
    """The issue's case: `appliance model install models/gemma-3-270m-q4_k_m.gguf` installed the
    270M demo model as medgemma-1.5-4b-it, and with that profile the demo notice disappeared."""
    with pytest.raises(ModelInstallError, match="not a medgemma-1.5-4b-it model: its own metadata says "
                                                "'Gemma 3 270m' \\(gemma3, 268M parameters\\)"):
        install(gguf, PRODUCTION, folder, check=check_readable)
    assert not folder.exists() or list(folder.iterdir()) == []
    assert model_files(Settings(model=PRODUCTION.name)).installed is False


def test_a_file_changed_after_install_is_refused_at_start(gguf, folder):
    install(gguf, DEMO, folder, check=check_readable)
    files = model_files(Settings(model=DEMO.name))
    with files.path.open("r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 0xFF]))
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        verify_model_file(files.path, files.sha256)


@pytest.mark.parametrize("damage", ["truncated", "not_gguf", "missing"])
def test_damaged_files_are_refused_and_the_folder_is_left_as_it_was(gguf, folder, tmp_path, damage):
    install(gguf, DEMO, folder, check=check_readable)  # an earlier good install stays in place
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    bad = tmp_path / "bad.gguf"
    if damage == "truncated":
        with gguf.open("rb") as src:
            bad.write_bytes(src.read(gguf.stat().st_size // 2))
    elif damage == "not_gguf":
        bad.write_bytes(b"<html>404</html>" * 100)
    message = {"truncated": "damaged or incomplete", "not_gguf": "not a GGUF", "missing": "not found"}[damage]
    with pytest.raises(ModelInstallError, match=message):
        install(bad, DEMO, folder, check=check_readable)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_too_little_disk_space_is_refused_before_copying(gguf, folder, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage(10 << 30, 10 << 30, 1 << 20))
    with pytest.raises(ModelInstallError, match="not enough disk space"):
        install(gguf, DEMO, folder, check=check_readable)
    assert list(folder.iterdir()) == []


def test_the_model_commands(gguf, tmp_path):
    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path / "home"), "APPLIANCE_MODEL": PRODUCTION.name}
    env.pop("APPLIANCE_MODELS", None)

    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "appliance.cli", "model", *argv], cwd=PROJECT_ROOT, env=env,
                              capture_output=True, text=True, timeout=120)

    listed = json.loads(cli("list", "--json").stdout)
    assert [r["profile"] for r in listed if r["active"]] == [PRODUCTION.name]
    assert next(r for r in listed if r["profile"] == PRODUCTION.name)["present"] is False
    refused = cli("install", str(gguf))  # the default profile is the clinical one: the demo file is refused
    assert refused.returncode == 2 and "not a medgemma-1.5-4b-it model" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert next(r for r in json.loads(cli("list", "--json").stdout) if r["profile"] == PRODUCTION.name)["present"] \
        is False
    done = cli("install", str(gguf), "--profile", DEMO.name, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sha256"] == SHIPPED_SHA
    row = next(r for r in json.loads(cli("list", "--json").stdout) if r["profile"] == DEMO.name)
    assert row["installed"] and row["present"] and row["path"].startswith(str(tmp_path / "home" / "models"))
    refused = cli("install", str(tmp_path / "nothing.gguf"))
    assert refused.returncode == 2 and "not found" in refused.stderr and "Traceback" not in refused.stderr


# -- the hash cache cannot be fooled by os.utime ---------------------------------------------
def test_a_byte_flipped_and_its_mtime_restored_is_hashed_again(tmp_path):
    """The issue's case: the start-up check was cached on size and mtime, so a flipped byte with
    the mtime restored by os.utime ran a file whose sha256 was not the pinned one."""
    import hashlib

    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    verify_model_file(path, sha)  # hashed, and remembered beside the file
    assert path.with_name(path.name + ".sha256-ok").exists()
    stat = path.stat()
    with path.open("r+b") as fh:
        fh.seek(100)
        fh.write(b"\xff")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_mtime_ns == stat.st_mtime_ns and path.stat().st_size == stat.st_size
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        verify_model_file(path, sha)


def test_a_cached_check_still_skips_the_hash_of_an_unchanged_file(tmp_path, monkeypatch):
    import hashlib

    import models.verify as verify

    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + b"x" * 4096)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    verify_model_file(path, sha)
    monkeypatch.setattr(verify, "sha256_of", lambda *a, **k: pytest.fail("hashed again"))
    verify_model_file(path, sha)


# -- what a GGUF says about itself --------------------------------------------------------------
def _gguf(meta: dict, tensors: list[tuple[int, ...]], cut: int | None = None) -> bytes:
    """A GGUF header (no tensor data): string metadata and tensors of the given shapes."""
    import struct

    def text(s: str) -> bytes:
        data = s.encode()
        return struct.pack("<Q", len(data)) + data

    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta) + 1)
    for key, value in meta.items():
        out += text(key) + struct.pack("<I", 8) + text(value)
    out += text("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) + text("a") + text("b") + text("c")
    for i, shape in enumerate(tensors):
        out += text(f"t{i}") + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", 12, 0)
    return out[:cut] if cut else out


@pytest.mark.parametrize("meta, tensors, fits", [
    ({"general.architecture": "gemma3", "general.name": "MedGemma 1.5 4b It"}, [(2560, 262144), (2560, 1_260_000)],
     True),
    ({"general.architecture": "gemma3", "general.basename": "medgemma-1.5"}, [(2560, 1_500_000)], True),
    ({"general.architecture": "gemma3", "general.name": "Gemma 3 4b It"}, [(2560, 1_500_000)], False),  # the name
    ({"general.architecture": "llama", "general.name": "MedGemma look-alike"}, [(2560, 1_500_000)], False),
    ({"general.architecture": "gemma3", "general.name": "MedGemma 27b"}, [(5376, 5_000_000)], False),  # 27B
    ({"general.architecture": "gemma3"}, [(2560, 1_500_000)], False),  # no name at all
])
def test_a_profile_accepts_only_its_own_model_by_the_files_metadata(tmp_path, meta, tensors, fits):
    from models.gguf_info import ModelIdentityError, check_identity

    path = tmp_path / "m.gguf"
    path.write_bytes(_gguf(meta, tensors))
    if fits:
        assert check_identity(path, PRODUCTION).architecture == "gemma3"
    else:
        with pytest.raises(ModelIdentityError, match="not a medgemma-1.5-4b-it model"):
            check_identity(path, PRODUCTION)


def test_a_header_that_ends_early_is_one_clear_error(tmp_path):
    from models.gguf_info import ModelIdentityError, read_info

    whole = _gguf({"general.architecture": "gemma3", "general.name": "MedGemma"}, [(10, 10)])
    for cut in (3, 10, 30, len(whole) - 5):
        path = tmp_path / f"cut{cut}.gguf"
        path.write_bytes(whole[:cut])
        with pytest.raises(ModelIdentityError):
            read_info(path)
