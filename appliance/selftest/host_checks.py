"""The clinic host's checks for ``appliance selftest`` (``run_host_checks``): requests a terminal or an
attacker on the clinic network would send, against the host's own record server and model
front, counted as refused as expected, allowed as expected, or let through.

Invariants:
- Everything runs in its own data home under the folder given (a scratch record with the demo
  patients, the knowledge database, a tokens file); the live record is never opened.
- The record server is the host's (``python -m appliance.host.serve ehr --http``: the access
  middleware, the approval rules, the safety gate, the read log) on a free loopback port; the
  model front is ``appliance.host.model_gate`` in front of a socket nothing listens on, so a request
  it lets through is answered 503 by the front itself and never reaches a model.
- Each case says what must happen; ``let_through`` counts requests that should have been
  refused and were not, ``failed`` names every case whose outcome was not the expected one.
  ``ok`` is true only when nothing failed. Both servers are stopped before this returns.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common.locations import PROJECT_ROOT

START_SECONDS = 60.0
REQUEST_SECONDS = 15.0
WRITE = {"patient_id": "abc-123", "substance": "latex", "reaction": "contact dermatitis", "severity": "mild"}
# pat-006 has a penicillin anaphylaxis on record: the host's gate must refuse this without an override.
ALLERGIC = {"patient_id": "pat-006", "medication_name": "amoxicillin", "dosage": "500 mg",
            "frequency": "every 8 hours", "notes": None}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _send(url: str, body: dict, headers: dict) -> tuple[int, dict, str]:
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_SECONDS) as response:
            return response.status, dict(response.headers), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers or {}), exc.read().decode("utf-8", "replace")


def mcp_call(url: str, tool: str, args: dict, bearer: str | None = None) -> tuple[int, dict | None]:
    """One tools/call over streamable HTTP as any MCP client makes it (a session, then the call):
    (HTTP status, the call's result or None)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "X-Appliance-User": "someone-else"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    status, reply, _ = _send(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host-checks", "version": "1"}}},
        headers)
    if status != 200:
        return status, None
    session = {k: v for k, v in reply.items() if k.lower() == "mcp-session-id"}
    _send(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {**headers, **session})
    status, _, text = _send(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": tool, "arguments": args}}, {**headers, **session})
    data = [line[5:] for line in text.splitlines() if line.startswith("data:")]
    try:
        return status, json.loads(data[-1] if data else text).get("result")
    except ValueError:
        return status, None


def _tool_error(result: dict | None) -> str | None:
    """The error type of a tool's result, or None when it succeeded."""
    if not result or not result.get("isError"):
        return None
    from mcp_servers.contracts import parse_tool_error

    return parse_tool_error(result["content"][0]["text"])[0]


def _get(url: str, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=REQUEST_SECONDS) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _loopback_reachable() -> bool:
    """Whether this process can listen on and reach 127.0.0.1 at all (it cannot in a fresh
    network namespace, ``unshare -n``, until loopback is brought up)."""
    try:
        with socket.socket() as server, socket.socket() as client:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            client.settimeout(1.0)
            client.connect(server.getsockname())
        return True
    except OSError:
        return False


@contextmanager
def _process(argv: list[str], env: dict, log: Path) -> Iterator[subprocess.Popen]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait(ready, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not ready():
        if proc.poll() is None and not _loopback_reachable():
            raise RuntimeError("the host check's servers cannot be reached on 127.0.0.1: loopback is down here "
                               "(a network namespace without `ip link set lo up`?)")
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the host check's server did not start: {log.read_text(errors='replace')[-500:]}")
        time.sleep(0.2)


class _Tally:
    def __init__(self):
        self.cases: list[dict] = []

    def add(self, case: str, expected: str, outcome: str, ok: bool) -> None:
        self.cases.append({"case": case, "expected": expected, "outcome": outcome, "ok": ok})

    def refused(self, case: str, status: int, result: dict | None = None, error_type: str | None = None) -> None:
        """A request that must be refused: at the door (401/403/503) or by the tool (``error_type``)."""
        kind = _tool_error(result)
        if error_type is None:
            ok = status in (401, 403)
            outcome = f"HTTP {status}"
        else:
            ok = status == 200 and kind == error_type
            outcome = f"HTTP {status}, {kind or 'written'}"
        self.add(case, "refused" + (f" ({error_type})" if error_type else ""), outcome, ok)

    def report(self, seconds: float) -> dict:
        refused = [c for c in self.cases if c["expected"].startswith("refused")]
        allowed = [c for c in self.cases if not c["expected"].startswith("refused")]
        return {
            "requests": len(self.cases),
            "refused_as_expected": sum(c["ok"] for c in refused),
            "let_through": sum(not c["ok"] for c in refused),
            "allowed_as_expected": sum(c["ok"] for c in allowed),
            "failed": [c["case"] for c in self.cases if not c["ok"]],
            "ok": all(c["ok"] for c in self.cases),
            "seconds": round(seconds, 1),
            "cases": self.cases,
        }


def _record_checks(tally: _Tally, home: Path, env: dict) -> None:
    from ehr_db.repository import EhrRepository
    from mcp_servers.access import add_terminal, read_terminals, revoke_terminal

    tokens = home / "terminals.json"
    token = add_terminal("desk-1", "host-check", tokens)
    spare = add_terminal("desk-2", "host-check-2", tokens)  # keeps the host closed once desk-1 is revoked
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    db = home / "ehr.sqlite"
    argv = [sys.executable, "-m", "appliance.host.serve", "ehr", "--db", str(db), "--http", f"127.0.0.1:{port}"]
    with _process(argv, env, home / "record-server.log") as proc:
        _wait(lambda: _get(url.replace("/mcp", "/"), None) != 0, proc, home / "record-server.log")
        status, result = mcp_call(url, "search_patient", {"name": "Maria Garcia"})
        tally.refused("a read without a token", status)
        tally.refused("a read with a wrong token", mcp_call(url, "search_patient", {"name": "Maria Garcia"},
                                                            token[:-2] + "xx")[0])
        stored = read_terminals(tokens)[0].token_check
        tally.refused("the tokens file's stored value as a token",
                      mcp_call(url, "search_patient", {"name": "Maria Garcia"}, stored)[0])
        status, result = mcp_call(url, "get_patient_chart", {"patient_id": "abc-123"}, token)
        logged = [r for r in EhrRepository(db).read_trail("abc-123") if r["actor"] == "host-check"]
        tally.add("a chart read with a token, logged as its account", "allowed and logged",
                  f"HTTP {status}, {len(logged)} read(s) logged", status == 200 and not _tool_error(result)
                  and len(logged) == 1)
        status, result = mcp_call(url, "add_allergy", WRITE, token)
        tally.refused("a write without an approval", status, result, "invalid_args")
        forged = {**WRITE, "approval": {"decision": "approval", "clinician": "Dr Someone Else", "safety": None}}
        status, result = mcp_call(url, "add_allergy", forged, token)
        kept = json.loads(EhrRepository(db).audit_trail("abc-123")[-1]["result"] or "{}").get("approval") or {}
        tally.add("a write naming another approver", "written, approved by the token's account",
                  f"HTTP {status}, approved by {kept.get('clinician')}",
                  status == 200 and not _tool_error(result) and kept.get("clinician") == "host-check")
        status, result = mcp_call(url, "record_audit_event", {"kind": "approval", "patient_id": "abc-123",
                                                              "details": {"clinician": "Dr Someone Else"}}, token)
        tally.refused("an audit event of the client's making", status, result, "invalid_args")
        approved = {**ALLERGIC, "approval": {"decision": "approval", "clinician": "host-check", "safety": None}}
        status, result = mcp_call(url, "prescribe_medication", approved, token)
        tally.refused("a prescription the host's safety gate blocks, without an override", status, result,
                      "rejected_by_user")
        revoke_terminal("desk-1", tokens)
        tally.refused("a revoked token", mcp_call(url, "search_patient", {"name": "Maria Garcia"}, token)[0])
        tokens.write_text('{"terminals": [', encoding="utf-8")
        status = mcp_call(url, "search_patient", {"name": "Maria Garcia"}, spare)[0]
        tally.add("a damaged tokens file", "refused (503)", f"HTTP {status}", status == 503)


def _model_checks(tally: _Tally, home: Path, env: dict) -> None:
    from mcp_servers.access import (
        add_terminal,
        read_terminals,
        revoke_terminal,
        token_digest,
    )

    tokens = home / "terminals.json"
    tokens.unlink(missing_ok=True)
    token = add_terminal("desk-1", "host-check", tokens)
    add_terminal("desk-2", "host-check-2", tokens)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="appliance-hc-") as folder:
        argv = [sys.executable, "-m", "appliance.host.model_gate", "--bind", "127.0.0.1", "--port", str(port),
                "--socket", str(Path(folder) / "nothing.sock")]
        with _process(argv, {**env, "APPLIANCE_MODEL_UPSTREAM_KEY": "unused"}, home / "model-front.log") as proc:
            _wait(lambda: _get(url + "/health", None) != 0, proc, home / "model-front.log")
            stored = read_terminals(tokens)[0].token_check
            for case, key in (("the model server without a key", None),
                              ("the model server with the tokens file's stored value", stored),
                              ("the model server with the raw token instead of its key", token)):
                tally.refused(case, _get(url + "/props", key))
            status = _get(url + "/props", token_digest(token))  # no model behind: the front answers 503
            tally.add("the model server with a terminal's key", "let through to the model",
                      f"HTTP {status}", status == 503)
            revoke_terminal("desk-1", tokens)
            tally.refused("the model server with a revoked terminal's key", _get(url + "/props", token_digest(token)))


def run_host_checks(workdir: Path) -> dict:
    """Run the host checks in a data home under ``workdir``; see the module docstring for the
    report. A check that cannot run at all is reported with ``error`` and ``ok`` false."""
    from ehr_db.setup import ensure_database as ensure_ehr
    from mcp_servers.knowledge.store import ensure_database as ensure_knowledge

    started = time.monotonic()
    home = Path(workdir) / "host-checks"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    tally = _Tally()
    env = {**os.environ, "APPLIANCE_HOME": str(home), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    try:
        ensure_ehr(home / "ehr.sqlite")
        ensure_knowledge(home / "knowledge.sqlite")
        _record_checks(tally, home, env)
        _model_checks(tally, home, env)
    except Exception as exc:  # noqa: BLE001 - the report says the checks did not all run
        report = tally.report(time.monotonic() - started)
        return {**report, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return tally.report(time.monotonic() - started)


if __name__ == "__main__":  # a manual run: python -m appliance.selftest.host_checks
    with tempfile.TemporaryDirectory(prefix="appliance-host-checks-") as scratch:
        print(json.dumps(run_host_checks(Path(scratch)), indent=2))
