"""``appliance serve`` (the clinic host: the model server and the three MCP servers over
HTTP, one command) and ``appliance --host URL`` (a terminal that uses them).

Invariants:
- The servers listen on consecutive ports from ``--port``: ``ehr`` on P, ``umls`` on P+1,
  ``knowledge`` on P+2, each at ``/mcp``, and the model (llama.cpp's ``llama-server``,
  ``models.llama_server``) on P+3; ``host_urls`` makes the same URLs from the one URL a
  terminal is given, so the two sides cannot disagree.
- The model server asks for the same terminal tokens as the MCP servers: its key file holds
  each terminal's token sha256 (``mcp_servers.access.token_digest``), written privately at
  start, so a terminal revoked while the host runs keeps the model until the host restarts
  (the record refuses it at once). Without tokens (loopback only) it asks for no key. It uses
  the operator's certificate too, or refuses to start when its build has no TLS.
- ``serve`` checks the address policy (``mcp_servers.access.http_policy``: no address off
  loopback without terminal tokens) once, before starting anything, brings the data home up to
  date (``appliance init``, no model), and then runs each server as its own process on it; it stops them all when it is stopped (Ctrl+C,
  SIGTERM) or when one of them exits, and its exit code says which.
- The model file is the profile's (``APPLIANCE_MODEL``, ``appliance model install``),
  verified like any other start before llama-server opens it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from appliance.errors import ApplianceError
from common.locations import PROJECT_ROOT

SERVERS = ("ehr", "umls", "knowledge")  # on ports P, P+1, P+2; the model on P+3
MODEL_PORT_OFFSET = len(SERVERS)


def host_urls(url: str) -> dict[str, str]:
    """``APPLIANCE_MCP_<NAME>_URL`` for each server of the host at ``url`` (``http[s]://HOST:PORT``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None or parts.path not in ("", "/"):
        raise ApplianceError(f"--host takes http://HOST:PORT or https://HOST:PORT (the port `appliance serve` "
                             f"printed), not {url!r}")
    netloc = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    urls = {f"APPLIANCE_MCP_{name.upper()}_URL": f"{parts.scheme}://{netloc}:{parts.port + i}/mcp"
            for i, name in enumerate(SERVERS)}
    urls["APPLIANCE_MODEL_SERVER"] = f"{parts.scheme}://{netloc}:{parts.port + MODEL_PORT_OFFSET}"
    return urls


def model_server_command(bind: str, port: int, tls: tuple[Path, Path] | None, slots: int,
                         terminals: list | None) -> list[str]:
    """llama-server's command line for this host, its key file written (0600) when terminals
    must authenticate; ``ApplianceError`` when it cannot be started."""
    from appliance.config import Settings
    from appliance.runtime import model_files
    from common.locations import PRIVATE_FILE_MODE, data_home
    from models import llama_server
    from models.verify import verify_model_file

    binary = llama_server.locate()
    if binary is None:
        raise ApplianceError("llama-server is not built here: run ./build.sh (it builds llama.cpp's server), or set "
                             "APPLIANCE_LLAMA_SERVER to one")
    if tls and not llama_server.has_tls(binary):
        raise ApplianceError("this llama-server was built without TLS (OpenSSL's headers were missing): install "
                             "libssl-dev and run ./build.sh again, or serve without --tls-cert on loopback")
    if not 1 <= slots <= 16:
        raise ApplianceError("--slots takes 1 to 16 requests decoded side by side")
    settings = Settings()
    files = model_files(settings)
    verify_model_file(files.path, files.sha256, hint="`appliance model install PATH` places a model file")
    key_file = None
    if terminals:
        key_file = data_home() / "model-server.keys"
        key_file.touch(mode=PRIVATE_FILE_MODE, exist_ok=True)
        key_file.write_text("".join(f"{t.token_sha256}\n" for t in terminals), encoding="utf-8")
    return llama_server.command(binary, llama_server.ServerSettings(
        model=files.path, alias=files.profile.name, host=bind, port=port, n_ctx=files.profile.n_ctx, slots=slots,
        threads=settings.n_threads, key_file=key_file, tls=tls))


def serve(bind: str, port: int, tls: tuple[Path, Path] | None = None, *, slots: int = 4, model: bool = True) -> int:
    from mcp_servers.access import AccessError, http_policy, read_terminals

    if not 1 <= port <= 65535 - MODEL_PORT_OFFSET:
        raise ApplianceError(f"--port must leave room for four ports (1-{65535 - MODEL_PORT_OFFSET})")
    try:
        http_policy(bind)
        terminals = read_terminals()
    except AccessError as exc:
        raise ApplianceError(str(exc)) from None
    model_argv = model_server_command(bind, port + MODEL_PORT_OFFSET, tls, slots, terminals) if model else None
    from appliance.init import init_home

    init_home(progress=lambda _m: None, with_model=False)  # idempotent: the host holds the record
    extra = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])] if tls else []
    procs = {name: subprocess.Popen([sys.executable, "-m", f"mcp_servers.{name}", "--http", f"{bind}:{port + i}",
                                     *extra], cwd=PROJECT_ROOT)
             for i, name in enumerate(SERVERS)}
    if model_argv is not None:  # its log at verbosity 1: start-up and errors, never a request's text
        from common.locations import PRIVATE_FILE_MODE, logs_dir

        logs_dir().mkdir(parents=True, exist_ok=True)
        log_path = logs_dir() / "model-server.log"
        log_path.touch(mode=PRIVATE_FILE_MODE, exist_ok=True)
        with open(log_path, "ab") as log:
            procs["model"] = subprocess.Popen(model_argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    scheme = "https" if tls else "http"
    last = port + (MODEL_PORT_OFFSET if model_argv else MODEL_PORT_OFFSET - 1)
    what = "the model, record, UMLS and knowledge servers" if model_argv else "the record, UMLS and knowledge servers"
    print(f"serving {what} on {bind}, ports {port}-{last}; on each terminal: "
          f"appliance --host {scheme}://{bind}:{port}  (Ctrl+C stops them)", flush=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        while not stopping:
            ended = {name: p.returncode for name, p in procs.items() if p.poll() is not None}
            if ended:
                print(f"appliance serve: the {', '.join(ended)} server stopped (exit "
                      f"{', '.join(str(c) for c in ended.values())}; the model server's log is "
                      f"logs/model-server.log in the data home); stopping the others", file=sys.stderr)
                return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return 0
