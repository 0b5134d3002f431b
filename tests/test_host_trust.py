"""The clinic host trusts no one it should not, over real HTTP requests in process: the
EHR server's streamable-HTTP app with the host's access middleware (``mcp_servers.access``), the
host's safety gate (``appliance.host.serve.host_prescription_check``) and the read log; the model
server's front (``appliance.host.model_gate``) against a stand-in upstream on a Unix socket."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database as ensure_ehr
from mcp_servers import access
from mcp_servers.contracts import parse_tool_error
from mcp_servers.ehr import server as ehr
from mcp_servers.knowledge.store import ensure_database as ensure_knowledge

pytestmark = pytest.mark.timeout(120)
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
METFORMIN = {"patient_id": "abc-123", "medication_name": "Metformin", "dosage": "500 mg", "frequency": "twice daily",
             "notes": None}
# pat-006 has a penicillin anaphylaxis on record (the case).
AMOXICILLIN = {"patient_id": "pat-006", "medication_name": "amoxicillin", "dosage": "500 mg",
               "frequency": "every 8 hours", "notes": None}


class Host:
    """One EHR server app on a data home, and the requests a terminal (or an attacker) sends."""

    def __init__(self, client: TestClient, home: Path):
        self.client = client
        self.home = home
        self.tokens = home / "terminals.json"
        self.db = home / "ehr.sqlite"

    def post(self, tool: str, args: dict, *, bearer: str | None = None, user: str | None = "someone-else"):
        headers = dict(MCP_HEADERS)
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        if user:
            headers["X-Appliance-User"] = user
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}
        return self.client.post("/mcp", headers=headers, json=body)

    def call(self, tool: str, args: dict, **kw) -> dict:
        """The tool's result; ``{"error_type": ..., "text": ...}`` for a ToolError."""
        response = self.post(tool, args, **kw)
        assert response.status_code == 200, (response.status_code, response.text)
        result = response.json()["result"]
        if result.get("isError"):
            kind, text = parse_tool_error(result["content"][0]["text"])
            return {"error_type": kind, "text": text}
        return result["structuredContent"]

    def rows(self, table: str) -> int:
        conn = sqlite3.connect(self.db)
        try:
            return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        finally:
            conn.close()


@contextmanager
def _host(home: Path, bind: str = "127.0.0.1", *, gate: bool = False):
    ensure_ehr(home / "ehr.sqlite")
    ehr.configure(home / "ehr.sqlite")
    if gate:
        from appliance.host.serve import host_prescription_check

        ensure_knowledge(home / "knowledge.sqlite")
        ehr.set_prescription_check(host_prescription_check(home / "knowledge.sqlite"))
    policy = access.http_policy(bind, home / "terminals.json")
    app = ehr.mcp.http_app(json_response=True, stateless_http=True, middleware=policy.middleware())
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:
            yield Host(client, home)
    finally:
        ehr.configure(None)
        ehr.set_prescription_check(None)


@pytest.fixture
def host(tmp_path):
    with _host(tmp_path) as h:
        yield h


@pytest.fixture
def gated(tmp_path):
    with _host(tmp_path, gate=True) as h:
        yield h


# -- tokens from the first one on --------------------------------------------------------------
def test_a_token_added_while_the_host_runs_closes_it_to_everyone_without_one(host):
    """The issue's case: a loopback host started with no tokens answered tokenless requests (and
    wrote in the spoofed header's name) after `terminal add`."""
    assert host.call("search_patient", {"name": "Maria Garcia"})["total_matches"] == 1  # no token issued: open
    token = access.add_terminal("late", "x", host.tokens)
    before = host.rows("medication_requests")
    for tool, args in (("search_patient", {"name": "Maria Garcia"}), ("prescribe_medication", METFORMIN)):
        refused = host.post(tool, args)
        assert refused.status_code == 401 and "terminal token" in refused.json()["error_description"]
        assert host.post(tool, args, bearer=token + "x").status_code == 401
    assert host.rows("medication_requests") == before
    assert host.call("search_patient", {"name": "Maria Garcia"}, bearer=token)["total_matches"] == 1
    access.revoke_terminal("late", host.tokens)  # the last token revoked: the host stays closed
    assert host.post("search_patient", {"name": "Maria Garcia"}, bearer=token).status_code == 401
    access.open_loopback(host.tokens, by="the operator")  # until the operator reopens it
    assert host.post("search_patient", {"name": "Maria Garcia"}).status_code == 200


def test_an_address_off_loopback_refuses_everyone_once_its_last_token_is_revoked(tmp_path):
    token = access.add_terminal("desk-1", "aokafor", tmp_path / "terminals.json")
    with _host(tmp_path, bind="0.0.0.0") as h:
        assert h.post("search_patient", {"name": "garcia"}, bearer=token).status_code == 200
        access.revoke_terminal("desk-1", h.tokens)
        assert h.post("search_patient", {"name": "garcia"}, bearer=token).status_code == 401
        assert h.post("search_patient", {"name": "garcia"}).status_code == 401


def test_a_damaged_tokens_file_is_503_and_one_line_on_the_console_never_a_500(host, capfd):
    token = access.add_terminal("desk-1", "aokafor", host.tokens)
    host.tokens.write_text('{"terminals": [{"name": "desk-1"', encoding="utf-8")
    for _ in range(3):
        refused = host.post("search_patient", {"name": "garcia"}, bearer=token)
        assert refused.status_code == 503 and "tokens file cannot be read" in refused.json()["error_description"]
    err = capfd.readouterr().err
    assert err.count("refusing every request") == 1 and "Traceback" not in err  # once, not per request
    host.tokens.write_text('{"terminals": 3}', encoding="utf-8")
    assert host.post("search_patient", {"name": "garcia"}, bearer=token).status_code == 503


# -- the server enforces what a terminal asks for ----------------------------------------------
def test_a_write_without_an_approval_is_refused_over_http(host):
    token = access.add_terminal("desk-1", "aokafor", host.tokens)
    before = host.rows("medication_requests"), host.rows("audit_log")
    refused = host.call("prescribe_medication", METFORMIN, bearer=token)
    assert refused["error_type"] == "invalid_args" and "needs the clinician's approval" in refused["text"]
    for tool, args in (("add_allergy", {"patient_id": "abc-123", "substance": "latex", "reaction": "rash",
                                        "severity": "mild"}),
                       ("save_clinical_note", {"patient_id": "abc-123", "note_type": "progress", "note_text": "x"})):
        assert host.call(tool, args, bearer=token)["error_type"] == "invalid_args"
    assert (host.rows("medication_requests"), host.rows("audit_log")) == before


def test_the_approver_is_the_tokens_account_whatever_the_request_names(host, capsys):
    token = access.add_terminal("desk-1", "aokafor", host.tokens)
    forged = {"decision": "approval", "clinician": "Dr Someone Else", "safety": None}
    written = host.call("prescribe_medication", {**METFORMIN, "approval": forged}, bearer=token)
    assert written["author"] == "aokafor"
    last = EhrRepository(host.db).audit_trail("abc-123")[-1]
    assert last["actor"] == "aokafor" and json.loads(last["result"])["approval"]["clinician"] == "aokafor"
    assert "Dr Someone Else" not in json.dumps(EhrRepository(host.db).audit_trail("abc-123"))


def test_a_client_cannot_write_audit_events_of_its_own_making(host):
    token = access.add_terminal("desk-1", "aokafor", host.tokens)
    before = host.rows("audit_log")
    for kind in ("approval", "override", "safety_findings", "restore"):
        made_up = host.call("record_audit_event", {"kind": kind, "patient_id": "abc-123",
                                                   "details": {"clinician": "Dr Someone Else"}}, bearer=token)
        assert made_up["error_type"] == "invalid_args"
    assert host.rows("audit_log") == before
    # A rejection shaped as the host gate's own rows (the case) is not taken either.
    posing = {"tool": "prescribe_medication", "clinician": None, "reason": "x", "safety": None,
              "decided_by": "the clinic host's safety gate", "decision": "override"}
    assert host.call("record_audit_event", {"kind": "rejection", "patient_id": "abc-123", "details": posing},
                     bearer=token)["error_type"] == "invalid_args"
    assert host.rows("audit_log") == before
    recorded = host.call("record_audit_event", {"kind": "rejection", "patient_id": "abc-123", "details": {
        "tool": "prescribe_medication", "clinician": "Dr Someone Else", "reason": "wrong dose", "safety": None}},
        bearer=token)
    last = EhrRepository(host.db).audit_trail("abc-123")[-1]
    assert recorded["kind"] == "rejection" and last["actor"] == "aokafor"
    details = json.loads(last["arguments"])["details"]
    assert details["clinician"] == "aokafor" and details["recorded_by"] == "terminal" and "decided_by" not in details


def _account(home: Path, name: str = "aokafor", password: str = "correct horse battery") -> None:
    from argon2 import PasswordHasher

    from appliance.accounts import AccountStore

    AccountStore(home / "accounts.sqlite", hasher=PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)).add(
        name, password)


def test_the_host_runs_the_safety_gate_and_a_blocking_report_needs_an_override_with_a_reason(gated, monkeypatch):
    """The issue's case: amoxicillin for pat-006 (penicillin anaphylaxis) written with any valid
    token and no approval, or with an approval that claimed no findings; an override needs a
    reason of real words and the token's account's password, checked by the host."""
    monkeypatch.setenv("APPLIANCE_HOME", str(gated.home))
    _account(gated.home)
    token = access.add_terminal("desk-1", "aokafor", gated.tokens)
    before = gated.rows("medication_requests")
    clean_claim = {"decision": "approval", "clinician": "aokafor", "safety": None}
    refused = gated.call("prescribe_medication", {**AMOXICILLIN, "approval": clean_claim}, bearer=token)
    assert refused["error_type"] == "rejected_by_user" and "refused by the clinic host" in refused["text"]
    assert "high-severity" in refused["text"] and gated.rows("medication_requests") == before
    rejection = EhrRepository(gated.db).audit_trail("pat-006")[-1]
    assert rejection["tool"] == "rejection" and rejection["actor"] == "aokafor"
    assert json.loads(rejection["arguments"])["details"]["safety"]["blocking"] is True
    no_reason = {"decision": "override", "clinician": "aokafor", "safety": {"override_reason": "  "}}
    assert gated.call("prescribe_medication", {**AMOXICILLIN, "approval": no_reason},
                      bearer=token)["error_type"] == "rejected_by_user"
    reason = "desensitised by the allergy service"
    one_letter = {"decision": "override", "clinician": "aokafor", "safety": {"override_reason": "   x  "},
                  "password": "correct horse battery"}
    no_password = {"decision": "override", "clinician": "someone", "safety": {"override_reason": reason}}
    wrong_password = {**no_password, "password": "not the password"}
    claimed_again = {**no_password, "safety": {"override_reason": reason, "reauthenticated": True}}
    for refused_override in (one_letter, no_password, wrong_password, claimed_again):
        answer = gated.call("prescribe_medication", {**AMOXICILLIN, "approval": refused_override}, bearer=token)
        assert answer["error_type"] == "rejected_by_user" and gated.rows("medication_requests") == before
    override = {"decision": "override", "clinician": "someone", "password": "correct horse battery",
                "safety": {"override_reason": reason, "findings": []}}
    written = gated.call("prescribe_medication", {**AMOXICILLIN, "approval": override}, bearer=token)
    assert written["author"] == "aokafor"
    assert "correct horse" not in json.dumps(EhrRepository(gated.db).audit_trail("pat-006"))
    kept = json.loads(EhrRepository(gated.db).audit_trail("pat-006")[-1]["result"])["approval"]
    assert kept["decision"] == "override" and kept["clinician"] == "aokafor"
    assert kept["safety"]["blocking"] is True and kept["safety"]["override_reason"] == reason
    assert kept["safety"]["reauthenticated"] is True
    assert any(f["severity"] == "high" for f in kept["safety"]["findings"])  # the host's report, not the client's


def test_a_prescription_keeps_the_hosts_report_not_the_clients(gated, monkeypatch):
    monkeypatch.setenv("APPLIANCE_HOME", str(gated.home))
    _account(gated.home)
    token = access.add_terminal("desk-1", "aokafor", gated.tokens)
    claimed = {"decision": "override", "clinician": "aokafor", "password": "correct horse battery",
               "safety": {"override_reason": "replaces the current order today",
                          "findings": [{"severity": "high", "text": "made up"}]}}
    assert "id" in gated.call("prescribe_medication", {**METFORMIN, "approval": claimed}, bearer=token)
    kept = json.loads(EhrRepository(gated.db).audit_trail("abc-123")[-1]["result"])["approval"]
    assert kept["decision"] in ("approval", "override") and "made up" not in json.dumps(kept)
    assert "checked" in kept["safety"]


# -- every chart read is audited --------------------------------------------------------------
def test_every_read_is_logged_without_a_searchs_text_and_shown_by_audit_show(host, capsys, monkeypatch):
    token = access.add_terminal("desk-1", "aokafor", host.tokens)
    host.call("search_patient", {"name": "Garcia Maria"}, bearer=token)
    host.call("get_patient_chart", {"patient_id": "pat-001"}, bearer=token, user="spoofed")
    host.call("search_patient", {"name": "Zzyzx"}, bearer=token)  # lists no one: one row without a patient
    reads = EhrRepository(host.db).read_trail("pat-001")
    assert [(r["actor"], r["terminal"], r["tool"]) for r in reads] == [
        ("aokafor", "desk-1", "search_patient"), ("aokafor", "desk-1", "get_patient_chart")]
    raw = host.db.read_bytes() + (host.db.with_name("ehr.sqlite-wal").read_bytes()
                                  if host.db.with_name("ehr.sqlite-wal").exists() else b"")
    assert b"Garcia Maria" not in raw and b"Zzyzx" not in raw
    conn = sqlite3.connect(host.db)
    assert conn.execute("SELECT count(*) FROM read_log WHERE patient_id IS NULL").fetchone()[0] == 1
    conn.close()
    from appliance.cli import main

    monkeypatch.setenv("APPLIANCE_HOME", str(host.home))
    assert main(["audit", "show", "--patient", "pat-001"]) == 0
    out = capsys.readouterr().out
    assert "reads of patient pat-001: 2" in out and "aokafor  get_patient_chart  terminal desk-1" in out
    assert main(["audit", "show", "--patient", "pat-001", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["reads"]) == 2


def test_reads_over_stdio_or_in_process_are_logged_as_this_processs_user(tmp_path, monkeypatch):
    from fastmcp import Client

    db = tmp_path / "ehr.sqlite"
    ensure_ehr(db)
    monkeypatch.setenv("APPLIANCE_USER", "dr.local")
    ehr.configure(db)
    try:
        async def read():
            async with Client(ehr.mcp) as client:
                await client.call_tool("get_patient_chart", {"patient_id": "abc-123"})

        asyncio.run(read())
    finally:
        ehr.configure(None)
    assert [(r["actor"], r["terminal"]) for r in EhrRepository(db).read_trail("abc-123")] == [("dr.local", None)]


def test_a_read_that_cannot_be_logged_is_not_answered(host, monkeypatch):
    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(EhrRepository, "log_read", broken)
    refused = host.call("get_patient_chart", {"patient_id": "abc-123"})
    assert refused["error_type"] == "permanent_failure" and "Maria" not in json.dumps(refused)


# -- what is stored is never a usable key --------------------------------------------------------
def test_nothing_in_the_tokens_file_opens_either_server(tmp_path):
    path = tmp_path / "terminals.json"
    token = access.add_terminal("desk-1", "aokafor", path)
    stored = access.read_terminals(path)[0].token_check
    record = access.Gate(path, open_without_tokens=False)
    model = access.Gate(path, open_without_tokens=False, model_keys=True)
    assert record.allows(token).account == "aokafor" and record.allows(stored) is None
    assert model.allows(access.token_digest(token)).name == "desk-1"
    assert model.allows(stored) is None and model.allows(token) is None
    assert stored not in (token, access.token_digest(token)) and access.token_digest(token) not in path.read_text()


def test_an_older_tokens_file_keeping_bare_digests_is_read_the_same_and_rewritten(tmp_path):
    path = tmp_path / "terminals.json"
    token = "an-older-terminal-token"
    path.write_text(json.dumps({"terminals": [{"name": "desk-1", "account": "aokafor",
                                               "token_sha256": access.token_digest(token),
                                               "created": "2026-01-01T00:00:00+00:00"}]}))
    assert access.Gate(path, open_without_tokens=False).allows(token).name == "desk-1"
    assert access.upgrade_terminals(path) is True and access.upgrade_terminals(path) is False
    assert access.token_digest(token) not in path.read_text()
    assert access.Gate(path, open_without_tokens=False, model_keys=True).allows(access.token_digest(token))


# -- the model server's front --------------------------------------------------------------------
@contextmanager
def _upstream(folder: Path):
    """A stand-in for llama-server on a Unix socket: it echoes the key it was sent, and streams."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    seen: list[str] = []

    async def anything(request):
        seen.append(request.headers.get("authorization", ""))
        if request.url.path == "/completion":
            async def tokens():
                for i in range(3):
                    yield f"data: {json.dumps({'content': str(i)})}\n\n".encode()
            return StreamingResponse(tokens(), media_type="text/event-stream")
        return JSONResponse({"model_alias": "gemma3-270m", "path": request.url.path})

    socket_path = folder / "llama.sock"
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/{p:path}", anything, methods=["GET", "POST"])]),
                                           uds=str(socket_path), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    try:
        yield socket_path, seen
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_the_model_front_checks_every_request_and_revocation_is_immediate(tmp_path):
    from appliance.host.model_gate import make_app

    tokens = tmp_path / "terminals.json"
    token = access.add_terminal("desk-1", "aokafor", tokens)
    other = access.add_terminal("desk-2", "bnurse", tokens)
    gate = access.Gate(tokens, open_without_tokens=True, model_keys=True)
    with tempfile.TemporaryDirectory(prefix="gate-") as short, _upstream(Path(short)) as (socket_path, seen):
        with TestClient(make_app(socket_path, "run-key", gate)) as client:
            def get(key: str | None):
                headers = {"Authorization": f"Bearer {key}"} if key else {}
                return client.get("/props", headers=headers)

            assert get(access.token_digest(token)).json()["model_alias"] == "gemma3-270m"
            assert seen == ["Bearer run-key"]  # llama-server gets the run's key, never the terminal's
            stored = access.read_terminals(tokens)[0].token_check
            for key in (None, stored, token, access.token_digest("a guess")):
                assert get(key).status_code == 401
            streamed = client.post("/completion", json={"prompt": [1, 2]},
                                   headers={"Authorization": f"Bearer {access.token_digest(other)}"})
            assert streamed.status_code == 200 and streamed.text.count("data: ") == 3
            access.revoke_terminal("desk-1", tokens)  # the host keeps running
            assert get(access.token_digest(token)).status_code == 401
            assert get(access.token_digest(other)).status_code == 200
            assert client.get("/health").status_code == 200  # no data: anyone, as llama-server's own
            tokens.write_text("{", encoding="utf-8")
            assert get(access.token_digest(other)).status_code == 503


def test_a_terminal_that_goes_away_ends_its_upstream_request_at_once(tmp_path):
    """A cancelled call closes its connection; the front closes the upstream request, so
    llama-server stops decoding it (queued or streaming), as it does when a terminal reaches it
    directly."""
    import socket

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from appliance.host.model_gate import make_app

    ended = threading.Event()

    async def endless(request):
        async def tokens():
            try:
                while True:
                    yield b'data: {"content": "x"}\n\n'
                    await asyncio.sleep(0.05)
            finally:
                ended.set()  # the upstream's generator is closed when its client goes away
        return StreamingResponse(tokens(), media_type="text/event-stream")

    tokens_file = tmp_path / "terminals.json"
    token = access.add_terminal("desk-1", "aokafor", tokens_file)
    gate = access.Gate(tokens_file, open_without_tokens=False, model_keys=True)
    with tempfile.TemporaryDirectory(prefix="gate-") as short:
        socket_path = Path(short) / "llama.sock"
        servers = [uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/completion", endless, methods=["POST"])]),
                                                 uds=str(socket_path), log_level="warning"))]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        servers.append(uvicorn.Server(uvicorn.Config(make_app(socket_path, "k", gate), host="127.0.0.1", port=port,
                                                     log_level="warning")))
        threads = [threading.Thread(target=s.run, daemon=True) for s in servers]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 20
            while not all(s.started for s in servers):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            conn = socket.create_connection(("127.0.0.1", port), timeout=10)
            body = b'{"prompt": [1]}'
            conn.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Authorization: Bearer {access.token_digest(token)}\r\n".encode()
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            assert b"200 OK" in conn.recv(4096)
            assert not ended.is_set()
            conn.close()  # the terminal cancels
            assert ended.wait(timeout=5)
        finally:
            for s in servers:
                s.should_exit = True
            for t in threads:
                t.join(timeout=10)


def test_a_request_dropped_as_its_upstream_read_fails_leaves_no_traceback_on_the_console():
    """The case: the terminal left while its answer streamed, the front closed the
    upstream connection, and the read it had just cancelled ended in ReadError instead of the
    cancellation (the stream closed under it); asyncio printed that never-retrieved error as a
    traceback on the host's console. ``_log_traceback`` is the flag asyncio prints it by."""
    from appliance.host.model_gate import _drop

    async def read_fails():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            raise ConnectionError("closed under the read") from None

    async def scene(drop):
        reading = asyncio.ensure_future(read_fails())
        await asyncio.sleep(0)
        drop(reading)
        await asyncio.sleep(0)
        assert reading.done()
        return reading

    assert asyncio.run(scene(lambda task: task.cancel()))._log_traceback  # what the front did
    assert not asyncio.run(scene(_drop))._log_traceback


def test_an_answer_cancelled_while_it_streams_leaves_no_unretrieved_read(monkeypatch):
    """The case CI met twice in whole-suite runs: the terminal went away, Starlette cancelled the
    streaming response while the front waited for llama-server's next bytes, the front closed
    the upstream connection, and the read in flight ended in ReadError that nobody took."""
    import httpx2 as httpx

    from appliance.host import model_gate

    made: list[asyncio.Future] = []
    ensure_future = asyncio.ensure_future

    def recording(awaitable):
        made.append(ensure_future(awaitable))
        return made[-1]

    monkeypatch.setattr(model_gate.asyncio, "ensure_future", recording)

    class Upstream:
        def __init__(self):
            self.closed = asyncio.Event()

        async def _chunks(self):
            yield b"data: {}\n\n"
            await self.closed.wait()
            raise httpx.ReadError("closed under the read")

        def aiter_raw(self):
            return self._chunks()

        async def aclose(self):
            self.closed.set()
            await asyncio.sleep(0)

    async def scene():
        gone = asyncio.get_running_loop().create_future()
        relay = model_gate._relay(Upstream(), gone)
        assert await relay.__anext__() == b"data: {}\n\n"
        waiting = ensure_future(relay.__anext__())
        await asyncio.sleep(0.01)
        waiting.cancel()  # Starlette cancelling the response mid-wait
        with pytest.raises(asyncio.CancelledError):
            await waiting
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(scene())
    assert made and all(task.done() for task in made)
    assert [task for task in made if task._log_traceback] == []
