"""The clinic host's llama-server gets the threads chosen for the host: ``--threads`` and
``--threads-batch`` from ``host_threads`` over the usable cores, ``APPLIANCE_N_THREADS`` winning,
and runs at a raised priority when the kernel allows it (asked of a real child process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from appliance.llm.threads import (
    HOST_NICE,
    host_threads,
    may_raise_priority,
    usable_cores,
)

ROOT = Path(__file__).resolve().parent.parent


def _flag(argv: list[str], name: str) -> int:
    return int(argv[argv.index(name) + 1])


@pytest.mark.parametrize("override", [None, "1", "3"])
def test_serve_passes_the_hosts_thread_counts(tmp_path, monkeypatch, override):
    from appliance.host import serve
    from appliance.runtime import ModelFiles
    from models import gguf_info, llama_server, verify
    from models.profiles import get_profile

    binary = tmp_path / "llama-server"
    binary.write_text("")
    files = ModelFiles(get_profile("gemma3-270m"), tmp_path / "m.gguf", None, tmp_path, False)
    monkeypatch.setattr(llama_server, "locate", lambda: binary)
    monkeypatch.setattr("appliance.runtime.model_files", lambda settings: files)
    monkeypatch.setattr(verify, "verify_model_file", lambda *a, **k: None)
    monkeypatch.setattr(gguf_info, "check_identity", lambda *a, **k: None)
    if override is None:
        monkeypatch.delenv("APPLIANCE_N_THREADS", raising=False)
    else:
        monkeypatch.setenv("APPLIANCE_N_THREADS", override)
    made = serve.model_server_command("127.0.0.1", 18770, None, 4)
    try:
        raised = may_raise_priority()
        expected = host_threads(usable_cores(), int(override) if override else None, raised)
        assert (made.llama_argv[:3] == ["nice", "-n", str(HOST_NICE)]) is raised
        assert made.llama_argv[3 if raised else 0] == str(binary)
        assert ("priority: raised" in made.summary) is raised
        assert _flag(made.llama_argv, "--threads") == expected.decode
        assert _flag(made.llama_argv, "--threads-batch") == expected.batch
        assert _flag(made.llama_argv, "--parallel") == 4  # slots share the same threads
    finally:
        made.folder.rmdir()


def test_the_command_line_defaults_batch_threads_to_the_decode_count(tmp_path):
    from models.llama_server import ServerSettings, command

    argv = command(tmp_path / "llama-server", ServerSettings(model=tmp_path / "m.gguf", alias="gemma3-270m",
                                                             host="127.0.0.1", port=1, n_ctx=8192, threads=3))
    assert (_flag(argv, "--threads"), _flag(argv, "--threads-batch")) == (3, 3)
    argv = command(tmp_path / "llama-server", ServerSettings(model=tmp_path / "m.gguf", alias="gemma3-270m",
                                                             host="127.0.0.1", port=1, n_ctx=8192, threads=3,
                                                             threads_batch=4))
    assert (_flag(argv, "--threads"), _flag(argv, "--threads-batch")) == (3, 4)


@pytest.mark.parametrize(("cores", "raised", "expected"), [
    (1, True, (1, 1)), (1, False, (1, 1)),
    (2, True, (2, 2)), (2, False, (1, 2)),  # at normal priority a busy core must not stall decode
    (3, True, (3, 3)), (3, False, (2, 3)),
    (4, True, (3, 4)), (4, False, (3, 4)), (8, False, (7, 8)),
])
def test_host_threads_keep_a_core_free_for_decode_only_when_the_priority_cannot_be_raised(cores, raised, expected):
    threads = host_threads(cores, None, raised)
    assert (threads.decode, threads.batch) == expected
    assert host_threads(cores, 5, raised) == host_threads(cores, 5, not raised)  # the operator's count wins


def test_the_priority_check_asks_the_kernel():
    """Root in a user namespace holds every capability bit yet may not lower a niceness: the check
    is a real attempt, so it says no there and yes where the attempt works."""
    tried = subprocess.run(["nice", "-n", str(HOST_NICE), "true"], capture_output=True, text=True)
    assert may_raise_priority() is (tried.returncode == 0 and "cannot set niceness" not in tried.stderr)
    inside = subprocess.run(["unshare", "-r", sys.executable, "-c",
                             "from appliance.llm.threads import may_raise_priority; print(may_raise_priority())"],
                            capture_output=True, text=True, cwd=ROOT)
    if inside.returncode == 0:  # unshare may be refused on a locked-down machine: then nothing to check
        assert inside.stdout.strip() == "False"


def test_the_command_line_runs_llama_server_under_nice_when_asked(tmp_path):
    from models.llama_server import ServerSettings, command

    base = dict(model=tmp_path / "m.gguf", alias="gemma3-270m", host="127.0.0.1", port=1, n_ctx=8192)
    plain = command(tmp_path / "llama-server", ServerSettings(**base))
    niced = command(tmp_path / "llama-server", ServerSettings(**base, nice=HOST_NICE))
    assert niced == ["nice", "-n", str(HOST_NICE), *plain]
