"""``appliance serve`` (the clinic host: the three MCP servers over HTTP, one command) and
``appliance --host URL`` (a terminal that uses them).

Invariants:
- The servers listen on consecutive ports from ``--port``: ``ehr`` on P, ``umls`` on P+1,
  ``knowledge`` on P+2, each at ``/mcp``; ``host_urls`` makes the same three URLs from the one
  URL a terminal is given, so the two sides cannot disagree.
- ``serve`` checks the address policy (``mcp_servers.access.http_policy``: no address off
  loopback without terminal tokens) once, before starting anything, brings the data home up to
  date (``appliance init``, no model), and then runs each server as its own process on it; it stops them all when it is stopped (Ctrl+C,
  SIGTERM) or when one of them exits, and its exit code says which.
- The model still runs on each terminal, in process (a shared model server is not built yet).
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

SERVERS = ("ehr", "umls", "knowledge")  # on ports P, P+1, P+2


def host_urls(url: str) -> dict[str, str]:
    """``APPLIANCE_MCP_<NAME>_URL`` for each server of the host at ``url`` (``http[s]://HOST:PORT``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None or parts.path not in ("", "/"):
        raise ApplianceError(f"--host takes http://HOST:PORT or https://HOST:PORT (the port `appliance serve` "
                             f"printed), not {url!r}")
    netloc = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return {f"APPLIANCE_MCP_{name.upper()}_URL": f"{parts.scheme}://{netloc}:{parts.port + i}/mcp"
            for i, name in enumerate(SERVERS)}


def serve(bind: str, port: int, tls: tuple[Path, Path] | None = None) -> int:
    from mcp_servers.access import AccessError, http_policy

    if not 1 <= port <= 65533:
        raise ApplianceError("--port must leave room for three ports (1-65533)")
    try:
        http_policy(bind)
    except AccessError as exc:
        raise ApplianceError(str(exc)) from None
    from appliance.init import init_home

    init_home(progress=lambda _m: None, with_model=False)  # idempotent: the host holds the record
    extra = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])] if tls else []
    procs = {name: subprocess.Popen([sys.executable, "-m", f"mcp_servers.{name}", "--http", f"{bind}:{port + i}",
                                     *extra], cwd=PROJECT_ROOT)
             for i, name in enumerate(SERVERS)}
    scheme = "https" if tls else "http"
    print(f"serving the record, UMLS and knowledge servers on {bind}, ports {port}-{port + 2}; on each terminal: "
          f"appliance --host {scheme}://{bind}:{port}  (Ctrl+C stops them)", flush=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        while not stopping:
            ended = {name: p.returncode for name, p in procs.items() if p.poll() is not None}
            if ended:
                print(f"appliance serve: the {', '.join(ended)} server stopped (exit "
                      f"{', '.join(str(c) for c in ended.values())}); stopping the others", file=sys.stderr)
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
