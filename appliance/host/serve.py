"""``appliance serve`` (the clinic host: the model server and the three MCP servers over
HTTP, one command) and ``appliance --host URL`` (a terminal that uses them).

Invariants:
- The servers listen on consecutive ports from ``--port``: ``ehr`` on P, ``umls`` on P+1,
  ``knowledge`` on P+2, each at ``/mcp``, and the model on P+3; ``host_urls`` makes the same
  URLs from the one URL a terminal is given, so the two sides cannot disagree.
- The model on P+3 is ``appliance.host.model_gate``: it checks every request's key against the
  terminals file (revocation is immediate; nothing stored is a usable key) and passes it to
  llama.cpp's ``llama-server`` (``models.llama_server``), which listens only on a Unix socket
  in a private temporary folder and asks for a key made for this run. Without tokens
  (loopback only) the gate asks for no key. The gate speaks HTTPS with the operator's
  certificate, so llama-server needs no TLS build.
- The host's EHR server runs the medication safety gate on every prescription
  (``mcp_servers.ehr.server.set_prescription_check``, filled by ``host_prescription_check``): the
  chart from the record, the drug data from the host's knowledge database, decided by the one
  safety policy (``appliance.safety.policy.decide``): a report that needs an override is refused
  unless the approval overrides it with a reason of real words and the password of the token's
  account, checked here; the host's report is what the write's audit row keeps.
- ``serve`` checks everything an operator can get wrong before announcing or starting
  anything: the address policy (``mcp_servers.access.http_policy``: no address off loopback
  without terminal tokens), a readable tokens file (an older one is rewritten without usable
  keys), a certificate and key that belong together, the model file (verified, and its own
  metadata matching the profile). Each is one line, exit 2. It then brings the data home up to
  date (``appliance init``, no model) and runs each server as its own process; it stops them
  all when it is stopped (Ctrl+C, SIGTERM) or when one of them exits, and its exit code says
  which.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from appliance.errors import ApplianceError
from common import environment
from common.locations import PROJECT_ROOT

SERVERS = environment.SERVERS  # on ports P, P+1, P+2; the model on P+3
MODEL_PORT_OFFSET = len(SERVERS)


def host_urls(url: str) -> dict[str, str]:
    """``APPLIANCE_MCP_<NAME>_URL`` for each server of the host at ``url`` (``http[s]://HOST:PORT``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None or parts.path not in ("", "/"):
        raise ApplianceError(f"--host takes http://HOST:PORT or https://HOST:PORT (the port `appliance serve` "
                             f"printed), not {url!r}")
    netloc = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    urls = {environment.server_url_variable(name): f"{parts.scheme}://{netloc}:{parts.port + i}/mcp"
            for i, name in enumerate(SERVERS)}
    urls[environment.MODEL_SERVER] = f"{parts.scheme}://{netloc}:{parts.port + MODEL_PORT_OFFSET}"
    return urls


@dataclass(frozen=True)
class ModelServer:
    """llama-server's command line and environment, and the gate's, for one host run."""

    llama_argv: list[str]
    gate_argv: list[str]
    env: dict[str, str]  # the run's upstream key, for both
    folder: Path  # the private folder of llama-server's socket (removed when the host stops)
    summary: str  # one line for the operator: whether the model answers images (and why not), its priority


def model_server_command(bind: str, port: int, tls: tuple[Path, Path] | None, slots: int) -> ModelServer:
    """llama-server on a private socket behind ``appliance.host.model_gate`` on ``bind:port``;
    ``ApplianceError`` when it cannot be started."""
    from appliance.config import Settings
    from appliance.host.model_gate import UPSTREAM_KEY_ENV
    from appliance.llm.threads import (
        HOST_NICE,
        host_threads,
        may_raise_priority,
        usable_cores,
    )
    from appliance.runtime import model_files
    from models import llama_server
    from models.gguf_info import ModelIdentityError, check_identity
    from models.projector import projector_problem
    from models.verify import verify_model_file

    binary = llama_server.locate()
    if binary is None:
        raise ApplianceError("llama-server is not built here: run ./build.sh (it builds llama.cpp's server), or set "
                             "APPLIANCE_LLAMA_SERVER to one")
    if not 1 <= slots <= 16:
        raise ApplianceError("--slots takes 1 to 16 requests decoded side by side")
    settings = Settings()
    files = model_files(settings)
    verify_model_file(files.path, files.sha256, hint="`appliance model install PATH` places a model file")
    try:
        check_identity(files.path, files.profile)
    except ModelIdentityError as exc:
        raise ApplianceError(str(exc)) from None
    problem = projector_problem(files.profile, files.folder)
    mmproj = files.profile.mmproj_path(files.folder) if problem is None else None
    images = f"images: on ({mmproj.name})" if mmproj else f"images: off ({problem})"
    raised = may_raise_priority()
    threads = host_threads(usable_cores(), settings.n_threads, raised)  # fixed for the server's life
    priority = (f"priority: raised (nice {HOST_NICE}), {threads.decode} decode threads" if raised else
                f"priority: normal (no permission to raise it), {threads.decode} decode threads")
    folder = Path(tempfile.mkdtemp(prefix="appliance-model-"))  # 0700; short, for the socket path limit
    socket_path = folder / "llama.sock"
    llama_argv = llama_server.command(binary, llama_server.ServerSettings(
        model=files.path, alias=files.profile.name, host=str(socket_path), port=port, n_ctx=files.profile.n_ctx,
        slots=slots, threads=threads.decode, threads_batch=threads.batch, mmproj=mmproj,
        nice=HOST_NICE if raised else None))
    key = secrets.token_urlsafe(32)
    gate_argv = [sys.executable, "-m", "appliance.host.model_gate", "--bind", bind, "--port", str(port),
                 "--socket", str(socket_path)]
    if tls:
        gate_argv += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
    return ModelServer(llama_argv, gate_argv, {llama_server.API_KEY_ENV: key, UPSTREAM_KEY_ENV: key}, folder,
                       f"{images}; {priority}")


def _fit(entry: dict) -> dict:
    """A report's audit entry within the agent's share of the record's bound (one rule)."""
    from appliance.agent.write_audit import SAFETY_AUDIT_CHARS
    from appliance.safety.report import fit_audit

    return fit_audit(entry, SAFETY_AUDIT_CHARS)


def host_prescription_check(knowledge_db: Path):
    """The host's safety gate for ``mcp_servers.ehr.server.set_prescription_check``: the public
    ``appliance.safety`` API over the host's knowledge database (a fresh read-only connection
    per prescription: the server calls tools from several threads), decided by the one safety
    policy every door applies (``appliance.safety.policy.decide``): a report that needs an
    override (a high finding or anything not checked) is written only as an override with a
    reason of real words and the password of the token's account, which the host checks itself."""
    from appliance.accounts import AccountStore
    from appliance.accounts.reauthenticate import reauthenticate
    from appliance.safety import (
        Override,
        OverridePolicy,
        StoreKnowledge,
        check_prescription,
        decide,
    )
    from appliance.safety.chart_gate import not_run
    from mcp_servers.ehr.host_gate import PrescriptionRefused

    policy = OverridePolicy.from_settings()
    how = "approve it again as an override, with a reason of real words and your password"

    def check(prescription: dict, chart: dict, approval: dict | None, again=None) -> dict:
        drug = prescription["medication_name"]
        sent = approval or {}
        overriding = sent.get("decision") == "override"
        reason = (sent.get("safety") or {}).get("override_reason") if overriding else None
        knowledge = StoreKnowledge(knowledge_db)
        try:
            report = check_prescription(drug, chart, knowledge, dosage=prescription.get("dosage"),
                                        frequency=prescription.get("frequency"), notes=prescription.get("notes"))
        except Exception:  # noqa: BLE001 - a gate that cannot run never passes a prescription as checked
            report = not_run(drug)
        finally:
            knowledge.close()
        reauthenticated = False
        if overriding and report.needs_override and again is not None:
            reauthenticated = reauthenticate(AccountStore(), again.account, again.password)
        decision = decide(report, True, Override(reason, reauthenticated), policy, how_to_override=how)
        if not decision.allowed:
            raise PrescriptionRefused(decision.message.replace("refused:", "refused by the clinic host:", 1),
                                      _fit(decision.audit))
        return {"decision": decision.kind, "safety": _fit(decision.audit)}

    return check


def _check_tls(tls: tuple[Path, Path] | None) -> None:
    from mcp_servers.serving import tls_problem

    problem = tls_problem(*tls) if tls else None
    if problem:
        raise ApplianceError(problem)


def serve(bind: str, port: int, tls: tuple[Path, Path] | None = None, *, slots: int = 4, model: bool = True) -> int:
    from mcp_servers.access import AccessError, http_policy, upgrade_terminals

    if not 1 <= port <= 65535 - MODEL_PORT_OFFSET:
        raise ApplianceError(f"--port must leave room for four ports (1-{65535 - MODEL_PORT_OFFSET})")
    try:
        http_policy(bind)
        upgrade_terminals()
    except AccessError as exc:
        raise ApplianceError(str(exc)) from None
    _check_tls(tls)
    model_server = model_server_command(bind, port + MODEL_PORT_OFFSET, tls, slots) if model else None
    try:
        return _run(bind, port, tls, model_server)
    finally:
        if model_server is not None:
            shutil.rmtree(model_server.folder, ignore_errors=True)


def _run(bind: str, port: int, tls: tuple[Path, Path] | None, model_server: ModelServer | None) -> int:
    from appliance.setup.home import init_home

    init_home(progress=lambda _m: None, with_model=False)  # idempotent: the host holds the record
    extra = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])] if tls else []
    procs = {}
    for i, name in enumerate(SERVERS):  # the record through this module: it runs the safety gate
        module = ["appliance.host.serve", "ehr"] if name == "ehr" else [f"mcp_servers.{name}"]
        procs[name] = subprocess.Popen([sys.executable, "-m", *module, "--http", f"{bind}:{port + i}", *extra],
                                       cwd=PROJECT_ROOT)
    if model_server is not None:  # its log at verbosity 1: start-up and errors, never a request's text
        from common.locations import PRIVATE_FILE_MODE, logs_dir

        logs_dir().mkdir(parents=True, exist_ok=True)
        log_path = logs_dir() / "model-server.log"
        log_path.touch(mode=PRIVATE_FILE_MODE, exist_ok=True)
        env = {**os.environ, **model_server.env}
        with open(log_path, "ab") as log:
            procs["model"] = subprocess.Popen(model_server.llama_argv, stdin=subprocess.DEVNULL, stdout=log,
                                              stderr=log, env=env)
        procs["model gate"] = subprocess.Popen(model_server.gate_argv, cwd=PROJECT_ROOT, env=env)
    scheme = "https" if tls else "http"
    last = port + (MODEL_PORT_OFFSET if model_server else MODEL_PORT_OFFSET - 1)
    what = "the model, record, UMLS and knowledge servers" if model_server else \
        "the record, UMLS and knowledge servers"
    print(f"serving {what} on {bind}, ports {port}-{last}; on each terminal: "
          f"appliance --host {scheme}://{bind}:{port}  (Ctrl+C stops them)", flush=True)
    if model_server is not None:
        print(f"the model server: {model_server.summary}", flush=True)
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


def _host_ehr(argv: list[str]) -> int:
    """The host's EHR server: ``mcp_servers.ehr.server`` with the safety gate on prescriptions."""
    from common.locations import knowledge_db_path
    from mcp_servers.ehr import server as ehr

    ehr.set_prescription_check(host_prescription_check(knowledge_db_path()))
    return ehr.main(argv)


if __name__ == "__main__":  # ``python -m appliance.host.serve ehr --http HOST:PORT``: run by ``serve``
    if sys.argv[1:2] != ["ehr"]:
        sys.exit("python -m appliance.host.serve ehr --http HOST:PORT (run by `appliance serve`)")
    sys.exit(_host_ehr(sys.argv[2:]))
