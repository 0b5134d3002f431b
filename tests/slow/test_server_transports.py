"""Each MCP server over real transports, as any MCP client would use it: a stdio subprocess
(how the agent starts it) and streamable HTTP on localhost (a clinic sharing one server)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import ToolError

from appliance.bench.clinic import free_ports
from ehr_db.setup import ensure_database as ensure_ehr
from mcp_servers.contracts import parse_tool_error
from mcp_servers.knowledge.store import ensure_database as ensure_knowledge
from mcp_servers.umls.store import ensure_database as ensure_umls

PROJECT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "FASTMCP_CHECK_FOR_UPDATES": "off", "APPLIANCE_USER": "transport-test"}
# What the agent's code sends with an approved write; over HTTP a write needs one (stdio does not).
APPROVED = {"decision": "approval", "clinician": "whoever the request names", "safety": None}


async def _error_type(client: Client, tool: str, args: dict) -> str:
    with pytest.raises(ToolError) as exc:
        await client.call_tool(tool, args)
    return parse_tool_error(str(exc.value))[0]


async def _ehr(client: Client) -> None:
    assert {t.name for t in await client.list_tools()} == {
        "search_patient", "get_patient_chart", "prescribe_medication", "add_allergy", "save_clinical_note",
        "record_audit_event", "change_medication_order", "update_medication_status"}
    found = (await client.call_tool("search_patient", {"name": "Maria Garcia"})).data
    pid = found["matches"][0]["patient_id"]
    chart = (await client.call_tool("get_patient_chart", {"patient_id": pid})).data
    assert chart["patient"]["name"] == "Maria Garcia"
    written = (await client.call_tool("prescribe_medication", {
        "patient_id": "abc-123", "medication_name": "Metformin", "dosage": "500 mg",
        "frequency": "twice daily", "notes": None, "approval": APPROVED})).data
    assert written["author"] == "transport-test"
    assert await _error_type(client, "get_patient_chart", {"patient_id": "zzz-999"}) == "patient_not_found"


async def _umls(client: Client) -> None:
    assert {t.name for t in await client.list_tools()} == {
        "concept_search", "get_concept", "get_semantic_type", "drug_vocabulary", "ground_text"}
    found = (await client.call_tool("concept_search", {"term": "acetaminophen", "max_results": 3})).data
    best = found["candidates"][0]
    assert (best["cui"], best["snomed_code"], best["score"]) == ("C0000970", "387517004", 1.0)
    concept = (await client.call_tool("get_concept", {"cui": "C0019134"})).data
    assert concept["name"] == "Heparin" and concept["codes"]["rxnorm"] == "5224"
    assert await _error_type(client, "concept_search", {"term": "qqzzxxvv"}) == "not_found"


async def _knowledge(client: Client) -> None:
    safety = await client.call_tool("check_drug_safety", {"drug_name": "Tylenol"})
    assert safety.structured_content["drug"] == "acetaminophen"
    pair = await client.call_tool("check_drug_interactions", {"drug_names": ["warfarin", "Advil"]})
    assert pair.structured_content["interactions"][0]["severity"] == "major"
    trials = await client.call_tool("find_clinical_trials", {"condition": "atrial fibrillation", "status": "active"})
    assert trials.structured_content["trials"][0]["nct_id"] == "NCT-DEMO-0003"
    vocabulary = await client.call_tool("drug_vocabulary", {})
    assert "Coumadin" in vocabulary.structured_content["names"]
    assert await _error_type(client, "check_drug_safety", {"drug_name": "Zorblax"}) == "drug_not_in_database"


SERVERS = {"ehr": (ensure_ehr, _ehr), "umls": (ensure_umls, _umls), "knowledge": (ensure_knowledge, _knowledge)}


@pytest.fixture(params=list(SERVERS))
def server(request, tmp_path) -> tuple[str, Path]:
    name = request.param
    db = tmp_path / f"{name}.sqlite"
    SERVERS[name][0](db)
    return name, db


async def _exercise(name: str, client: Client) -> None:
    async with client:
        await SERVERS[name][1](client)


def test_stdio_round_trip(server, tmp_path):
    name, db = server
    transport = StdioTransport(sys.executable, ["-m", f"mcp_servers.{name}", "--db", str(db)], env=ENV,
                               cwd=str(PROJECT), log_file=tmp_path / "server.log")
    asyncio.run(_exercise(name, Client(transport, timeout=30)))


def _free_port() -> int:
    return free_ports(1)  # below the ephemeral range: no client connection takes it first


async def _wait_until_up(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            async with Client(url, timeout=5) as client:
                await client.list_tools()
                return
        except Exception:  # noqa: BLE001 - not listening yet
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


@contextmanager
def _http_server(name: str, db: Path, home: Path, tls: tuple[Path, Path] | None = None,
                 ) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """``python -m mcp_servers.<name> --http`` on a free loopback port, data home ``home``, HTTPS
    with ``tls`` (certificate, key): (its URL, its process, its log), stopped afterwards."""
    port = _free_port()
    log = home / f"{name}-server.log"
    extra = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])] if tls else []
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", f"mcp_servers.{name}", "--db", str(db), "--http", f"127.0.0.1:{port}", *extra],
            cwd=PROJECT, env={**ENV, "APPLIANCE_HOME": str(home)}, stdout=out, stderr=subprocess.STDOUT,
        )
        try:
            yield f"{'https' if tls else 'http'}://127.0.0.1:{port}/mcp", proc, log
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_streamable_http_round_trip(server, tmp_path):
    name, db = server
    with _http_server(name, db, tmp_path) as (url, proc, log):
        asyncio.run(_wait_until_up(url, proc, log))
        asyncio.run(_exercise(name, Client(url, timeout=30)))


def test_with_terminal_tokens_an_unauthenticated_request_is_refused_and_the_token_names_the_author(tmp_path):
    """A clinic server with tokens: no token, a wrong one or a revoked one reaches no tool; a
    valid one writes in its account's name whatever X-Appliance-User claims."""
    from mcp_servers.access import add_terminal, revoke_terminal

    db = tmp_path / "ehr.sqlite"
    ensure_ehr(db)
    tokens = tmp_path / "terminals.json"
    token = add_terminal("desk-1", "aokafor", tokens)
    add_terminal("desk-2", "bnurse", tokens)  # still a token after desk-1 is revoked: the host stays closed

    def client(url: str, bearer: str | None) -> Client:
        headers = {"X-Appliance-User": "someone-else"}
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        return Client(StreamableHttpTransport(url, headers=headers), timeout=30)

    def refused(url: str, bearer: str | None) -> None:
        """401 at the HTTP layer, before any MCP message is read; an MCP client gets no tools."""
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10)
        assert exc.value.code == 401

        async def list_tools() -> None:
            async with client(url, bearer) as c:
                await c.list_tools()

        with pytest.raises(Exception):  # noqa: B017, PT011 - the MCP client's own error type
            asyncio.run(list_tools())

    async def write(url: str) -> dict:
        async with client(url, token) as c:
            return (await c.call_tool("prescribe_medication", {
                "patient_id": "abc-123", "medication_name": "Metformin", "dosage": "500 mg",
                "frequency": "twice daily", "notes": None, "approval": APPROVED})).data

    with _http_server("ehr", db, tmp_path) as (url, proc, log):
        deadline = time.monotonic() + 30
        while True:  # up when a request with the token is answered
            assert proc.poll() is None, log.read_text()
            try:
                assert asyncio.run(write(url))["author"] == "aokafor"
                break
            except AssertionError:
                raise
            except Exception:  # noqa: BLE001 - not listening yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        refused(url, None)
        refused(url, token[:-2] + "xx")
        revoke_terminal("desk-1", tokens)
        refused(url, token)


def _post(url: str, tool: str, args: dict, bearer: str | None = None) -> tuple[int, dict]:
    """One tools/call over plain HTTP (a session first, as any MCP client): (status, JSON body)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "X-Appliance-User": "spoofed-header"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"

    def send(body: dict, extra: dict | None = None):
        request = urllib.request.Request(url, json.dumps(body).encode(), {**headers, **(extra or {})})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read().decode()
                return response.status, response.headers, text
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers, exc.read().decode()

    status, reply_headers, text = send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}})
    if status != 200:
        return status, json.loads(text or "{}")
    session = {"mcp-session-id": reply_headers["mcp-session-id"]}
    send({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    status, _, text = send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": tool, "arguments": args}}, session)
    data = [line[5:] for line in text.splitlines() if line.startswith("data:")]
    return status, json.loads(data[-1] if data else text)


def test_a_token_added_while_the_server_runs_is_asked_for_from_the_next_request(tmp_path):
    """The issue's case: `serve` started with no tokens, then `terminal add late --account x`:
    requests with no Authorization still got 200, and a tokenless prescribe_medication was written
    with the spoofed header as author."""
    db = tmp_path / "ehr.sqlite"
    ensure_ehr(db)
    write = {"patient_id": "abc-123", "medication_name": "Metformin", "dosage": "500 mg",
             "frequency": "twice daily", "notes": None, "approval": APPROVED}
    assert subprocess.run([sys.executable, "-m", "appliance.cli", "user", "add", "x"], cwd=PROJECT,
                          input="a long enough passphrase\n", env={**ENV, "APPLIANCE_HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=60).returncode == 0  # a terminal writes as an account
    with _http_server("ehr", db, tmp_path) as (url, proc, log):
        asyncio.run(_wait_until_up(url, proc, log))
        status, _ = _post(url, "search_patient", {"name": "Maria Garcia"})
        assert status == 200  # no token issued yet: a developer's loopback server
        token = subprocess.run([sys.executable, "-m", "appliance.cli", "terminal", "add", "late", "--account", "x",
                                "--json"], cwd=PROJECT, env={**ENV, "APPLIANCE_HOME": str(tmp_path)},
                               capture_output=True, text=True, timeout=60)
        token = json.loads(token.stdout)["token"]
        status, body = _post(url, "prescribe_medication", write)
        assert status == 401 and body["error"] == "invalid_token"
        assert _post(url, "search_patient", {"name": "Maria Garcia"})[0] == 401
        status, body = _post(url, "prescribe_medication", write, bearer=token)
        assert status == 200 and body["result"]["structuredContent"]["author"] == "x"
    import sqlite3

    actors = [r[0] for r in sqlite3.connect(db).execute("SELECT actor FROM audit_log WHERE tool = 'prescribe_medication'")]
    assert actors == ["x"]  # nothing in the spoofed header's name


def test_a_damaged_tokens_file_while_serving_is_503_and_one_console_line_never_a_500(tmp_path):
    from mcp_servers.access import add_terminal

    db = tmp_path / "ehr.sqlite"
    ensure_ehr(db)
    token = add_terminal("desk-1", "aokafor", tmp_path / "terminals.json")
    with _http_server("ehr", db, tmp_path) as (url, proc, log):
        deadline = time.monotonic() + 30
        while _post_or_none(url, token) != 200:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        (tmp_path / "terminals.json").write_text('{"terminals": [', encoding="utf-8")
        for _ in range(3):
            status, body = _post(url, "search_patient", {"name": "Maria Garcia"}, bearer=token)
            assert status == 503 and "tokens file cannot be read" in body["error_description"]
        time.sleep(0.5)
    text = log.read_text()
    assert "Traceback" not in text and " 500 " not in text
    assert text.count("refusing every request") == 1


def _post_or_none(url: str, token: str) -> int | None:
    try:
        return _post(url, "search_patient", {"name": "Maria Garcia"}, bearer=token)[0]
    except OSError:
        return None


def test_https_with_the_operators_certificate_and_a_terminal_token(tmp_path):
    """The clinic host serves HTTPS with its own certificate; the agent's client trusts it through
    APPLIANCE_MCP_CA and sends its token; without the certificate it refuses to talk."""
    from appliance.tools.mcp_client import MCPToolBox
    from mcp_servers.access import add_terminal

    cert, key = tmp_path / "host.pem", tmp_path / "host.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=clinic-host",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    db = tmp_path / "ehr.sqlite"
    ensure_ehr(db)
    token = add_terminal("desk-1", "aokafor", tmp_path / "terminals.json")
    with _http_server("ehr", db, tmp_path, (cert, key)) as (url, proc, log):
        env = {"APPLIANCE_HOME": str(tmp_path / "terminal"), "APPLIANCE_MCP_EHR_URL": url, "APPLIANCE_MCP_TOKEN": token}
        deadline = time.monotonic() + 30
        with MCPToolBox({**env, "APPLIANCE_MCP_CA": str(cert)}) as box:
            while not (found := box.call("search_patient", {"name": "Maria Garcia"}, 10)).ok:
                assert proc.poll() is None and time.monotonic() < deadline, (found, log.read_text())
                time.sleep(0.3)
            written = box.call("prescribe_medication", {"patient_id": "abc-123", "medication_name": "Metformin",
                                                        "dosage": "500 mg", "frequency": "twice daily", "notes": None},
                               10, idempotency_key="tls-test-0001", approval=APPROVED)
            assert written.ok and written.result["author"] == "aokafor"
        with MCPToolBox(env) as untrusting:  # the system trust store does not know the clinic's certificate
            refused = untrusting.call("search_patient", {"name": "Maria Garcia"}, 10)
            assert not refused.ok


def test_a_terminal_uses_the_servers_appliance_serve_starts(tmp_path):
    """`appliance serve` on the host, `appliance --host URL ask` on a terminal: the turn's tool call
    reaches the host's record over HTTP (the terminal's own data home gets no record)."""
    port = _free_port()
    while any(_busy(port + i) for i in range(4)):  # the MCP servers and the model server
        port = _free_port()
    host_home, terminal_home = tmp_path / "host", tmp_path / "terminal"
    for home in (host_home, terminal_home):
        home.mkdir()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen([sys.executable, "-m", "appliance.cli", "serve", "--port", str(port)], cwd=PROJECT,
                                 env={**ENV, "APPLIANCE_HOME": str(host_home)}, stdout=out, stderr=subprocess.STDOUT)
    try:
        asyncio.run(_wait_until_up(f"http://127.0.0.1:{port + 2}/mcp", serve, log))  # the last one started
        script = tmp_path / "script.json"
        script.write_text(json.dumps({
            "INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "Find a patient.",
                                 "suggested_tool": "search_patient"}],
            "TOOL_SELECT": [{"tool_name": "search_patient"}, {"name": "Maria Garcia"}],
            "RESULT_CLASSIFY": [{"quality": "success_rich", "brief_summary": "Found."}],
            "SYNTHESIZE": ["Maria Garcia is in the record."]}))
        asked = subprocess.run([sys.executable, "-m", "appliance.cli", "--host", f"http://127.0.0.1:{port}", "ask",
                                "--script", str(script), "--json", "Find Maria Garcia"], cwd=PROJECT,
                               env={**ENV, "APPLIANCE_HOME": str(terminal_home)}, capture_output=True, text=True,
                               timeout=120)
        assert asked.returncode == 0, asked.stderr[-2000:]
        calls = json.loads(asked.stdout)["tool_calls"]
        assert calls[0]["tool"] == "search_patient" and calls[0]["error_type"] is None, calls
        assert not (terminal_home / "ehr.sqlite").exists() and (host_home / "ehr.sqlite").exists()
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0, log.read_text()[-2000:]


def _busy(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
