"""The clinic host's llama-server gets the threads chosen for the host: ``--threads`` and
``--threads-batch`` from ``host_threads`` over the usable cores, ``APPLIANCE_N_THREADS`` winning."""

from __future__ import annotations

import pytest

from appliance.llm.threads import host_threads, usable_cores


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
        expected = host_threads(usable_cores(), int(override) if override else None)
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
