"""llama.cpp's own server on a free loopback port, for the tests that run the appliance's second
runtime (``appliance.llm.server``) against a real server started by the test."""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common.locations import models_dir
from models import llama_server
from models.assemble import assemble_default_model
from models.profiles import get_profile


def free_port(count: int = 1) -> int:
    """The first of ``count`` consecutive free loopback ports (``appliance.bench.clinic.free_ports``:
    below the ephemeral range, so a test's own connections cannot take one before the bind)."""
    from appliance.bench.clinic import free_ports

    return free_ports(count)


def binary() -> Path:
    found = llama_server.locate()
    assert found is not None, "llama-server is not built: run ./build.sh (python -m models.llama_server build)"
    return found


@contextmanager
def running(log: Path, *, key_file: Path | None = None, slots: int = 2, threads: int = 2,
            tls: tuple[Path, Path] | None = None, mmproj: Path | None = None) -> Iterator[str]:
    """The shipped small model served on loopback (HTTPS with ``tls``: certificate, key; images
    with ``mmproj``, a vision projector); yields its URL and stops it afterwards."""
    profile = get_profile("gemma3-270m")
    port = free_port()
    argv = llama_server.command(binary(), llama_server.ServerSettings(
        model=assemble_default_model(models_dir()), alias=profile.name, host="127.0.0.1", port=port,
        n_ctx=profile.n_ctx, slots=slots, threads=threads, key_file=key_file, tls=tls, mmproj=mmproj))
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log, ca_file=tls[0] if tls else None)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_healthy(url: str, proc: subprocess.Popen | None, log: Path | None, seconds: float = 60,
                 ca_file: Path | None = None) -> None:
    context = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
    deadline = time.monotonic() + seconds
    while True:
        if proc is not None:
            assert proc.poll() is None, log.read_text()[-3000:] if log else "llama-server exited"
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2, context=context) as response:
                if json.loads(response.read()).get("status") == "ok":
                    return
        except (OSError, ValueError, urllib.error.URLError):
            pass
        assert time.monotonic() < deadline, f"llama-server at {url} did not become healthy"
        time.sleep(0.2)
