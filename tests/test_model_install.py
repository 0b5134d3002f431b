"""``appliance model install|list`` on the shipped GGUF (standing in for an operator's MedGemma):
copied, hashed, checked by llama.cpp, recorded, verified at start; damaged files refused with
the folder left as it was."""

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
SHIPPED_SHA = get_profile("gemma3-270m").sha256


@pytest.fixture(scope="module")
def gguf():
    return assemble_default_model(models_dir())


@pytest.fixture
def folder(tmp_path, monkeypatch):
    path = tmp_path / "installed"
    monkeypatch.setenv("APPLIANCE_MODELS", str(path))
    return path


def test_an_installed_model_is_recorded_and_found_for_its_profile(gguf, folder):
    entry = install(gguf, PRODUCTION, folder, check=check_readable)
    assert entry.sha256 == SHIPPED_SHA and entry.size == gguf.stat().st_size
    assert read_registry(folder)[PRODUCTION.name] == entry
    assert sorted(p.name for p in folder.iterdir()) == sorted([PRODUCTION.file_name, REGISTRY])
    files = model_files(Settings(model=PRODUCTION.name))
    assert (files.path, files.sha256, files.folder, files.installed) == (folder / PRODUCTION.file_name, SHIPPED_SHA,
                                                                         folder, True)
    verify_model_file(files.path, files.sha256)  # what every start does
    # the embedded default still comes from the project, and the operator's own path still wins
    assert model_files(Settings()).path == models_dir() / "gemma-3-270m-q4_k_m.gguf"
    assert model_files(Settings(model=PRODUCTION.name, model_path=str(gguf))).installed is False


def test_a_file_changed_after_install_is_refused_at_start(gguf, folder):
    install(gguf, PRODUCTION, folder, check=check_readable)
    files = model_files(Settings(model=PRODUCTION.name))
    with files.path.open("r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 0xFF]))
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        verify_model_file(files.path, files.sha256)


@pytest.mark.parametrize("damage", ["truncated", "not_gguf", "missing"])
def test_damaged_files_are_refused_and_the_folder_is_left_as_it_was(gguf, folder, tmp_path, damage):
    install(gguf, PRODUCTION, folder, check=check_readable)  # an earlier good install stays in place
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    bad = tmp_path / "bad.gguf"
    if damage == "truncated":
        with gguf.open("rb") as src:
            bad.write_bytes(src.read(gguf.stat().st_size // 2))
    elif damage == "not_gguf":
        bad.write_bytes(b"<html>404</html>" * 100)
    message = {"truncated": "damaged or incomplete", "not_gguf": "not a GGUF", "missing": "not found"}[damage]
    with pytest.raises(ModelInstallError, match=message):
        install(bad, PRODUCTION, folder, check=check_readable)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_too_little_disk_space_is_refused_before_copying(gguf, folder, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage(10 << 30, 10 << 30, 1 << 20))
    with pytest.raises(ModelInstallError, match="not enough disk space"):
        install(gguf, PRODUCTION, folder, check=check_readable)
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
    done = cli("install", str(gguf), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sha256"] == SHIPPED_SHA
    row = next(r for r in json.loads(cli("list", "--json").stdout) if r["profile"] == PRODUCTION.name)
    assert row["installed"] and row["present"] and row["path"].startswith(str(tmp_path / "home" / "models"))
    refused = cli("install", str(tmp_path / "nothing.gguf"))
    assert refused.returncode == 2 and "not found" in refused.stderr and "Traceback" not in refused.stderr
