"""The agent's MCP client: one persistent fastmcp Client per local server.

Invariants:
- Servers run as stdio subprocesses (``python -m mcp_servers.<name>``) started on first use
  and kept for the session, or are reached over streamable HTTP when
  ``APPLIANCE_MCP_<NAME>_URL`` is set (a clinic sharing one server between terminals); over
  HTTP every request carries the terminal's bearer token from ``$APPLIANCE_MCP_TOKEN`` (a
  server with terminal tokens records the token's account as the author of writes) and
  ``X-Appliance-User`` from ``$APPLIANCE_USER`` (used only by a loopback server without tokens);
  an ``https://`` URL is verified against ``$APPLIANCE_MCP_CA`` when set (the clinic host's own
  certificate), else the system's trust store.
- All async work runs on one private event loop thread; callers are synchronous and every
  call has a deadline.
- Transport failures become ``ToolOutcome`` error types; nothing from fastmcp or anyio
  escapes to the graph. A call to an HTTP server that fails is explained in one line when the
  host refused this terminal's token or its certificate did not match the trusted one
  (``appliance.tools.host_refusal``), never as the library's exception. Server stderr goes to ``logs/mcp-<name>.log`` under the data home.
- A server the client gives up on (no answer by the deadline, a broken connection, an
  unreadable answer) is stopped at once: its process group is killed and the client waits
  until it has exited, under the call lock, before any new server is started. So a stopped or
  hung server can never finish a write behind the client's back. A failure after the request
  may have been sent is ``uncertain`` (for a write: the record may or may not have changed).
- A server that died between calls is noticed before the next call and started again; the
  call then goes to the new server.
- A write's ``idempotency_key`` and ``approval`` travel as the tool's ``contracts.IDEMPOTENCY_KEY``
  and ``contracts.APPROVAL`` arguments; an audit event goes to the EHR server's
  ``contracts.AUDIT_EVENT_TOOL``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import ssl
import sys
import threading
import uuid
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from appliance.errors import ToolClientError
from appliance.tools import processes
from appliance.tools.base import ToolOutcome
from common import environment
from common.locations import PROJECT_ROOT, logs_dir
from mcp_servers.contracts import (
    APPROVAL,
    AUDIT_EVENT_TOOL,
    IDEMPOTENCY_KEY,
    TOOL_SERVERS,
    parse_tool_error,
)

log = logging.getLogger(__name__)
SERVERS = ("ehr", "knowledge", "umls")
INIT_TIMEOUT = 10.0  # a server that has not answered its handshake by then is reported down
STOP_TIMEOUT = 5.0  # for a server given up on to be gone after SIGKILL (and its transport closed)
USER_HEADER = "X-Appliance-User"  # read by mcp_servers.ehr.server over HTTP


def _result_payload(result: Any) -> dict | None:
    """The JSON object a tool returned (structured content, else the first text block)."""
    structured = getattr(result, "structured_content", None)
    if isinstance(structured, dict):
        if set(structured) == {"result"} and isinstance(structured["result"], (dict, list)):
            inner = structured["result"]
            return inner if isinstance(inner, dict) else {"items": inner}
        return structured
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        if text:
            data = json.loads(text)
            return data if isinstance(data, dict) else {"items": data}
    return None


def _error_text(result: Any) -> str:
    for block in getattr(result, "content", None) or []:
        if getattr(block, "text", None):
            return block.text
    return "server_error: the tool reported an error without a message"



def clinic_trust(env) -> ssl.SSLContext | None:
    """HTTPS trust for the clinic host's servers (MCP and model): its certificate from
    ``APPLIANCE_MCP_CA`` in ``env``, else None (the system's); ``ToolClientError`` if unreadable."""
    ca = environment.read(environment.MCP_CA, env)
    if not ca:
        return None
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ToolClientError(f"APPLIANCE_MCP_CA {ca} is not a readable certificate file ({exc})") from None


class MCPToolBox:
    """Synchronous facade over fastmcp clients, safe to call from any one thread at a time."""

    def __init__(self, env: dict[str, str] | None = None):
        self._env = {**os.environ, **(env or {})}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()
        self._clients: dict[str, Any] = {}
        self._pids: dict[str, int] = {}  # stdio servers' processes, found by their start token
        self._stale: dict[str, int] = {}  # a server given up on that would not die: no new start
        self._lock = threading.Lock()
        self._http: dict[str, tuple[str, dict[str, str]]] = {}  # an HTTP server's URL and request headers
        self.refused: dict[str, str] = {}  # the last line saying why a clinic host turned this terminal away
        self.local_tools: dict[str, Any] = {"analyze_medical_image": self._image_unavailable}

    # -- lifecycle ----------------------------------------------------------------------
    def _make_client(self, server: str):
        from fastmcp import Client
        from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

        url = environment.read(environment.server_url_variable(server), self._env)
        if url:
            # A shared HTTP server cannot know which terminal is calling: say who the user is
            # (the EHR server records it as the author of writes; percent-encoded UTF-8).
            user = environment.read(environment.USER, self._env)
            headers = {USER_HEADER: quote(user, safe=" .,@'-")} if user else {}
            token = environment.read(environment.MCP_TOKEN, self._env)  # this terminal's (servers with tokens)
            if token:
                headers["Authorization"] = f"Bearer {token}"
            self._http[server] = (url, dict(headers))
            transport = StreamableHttpTransport(url, headers=headers, verify=self._trust())
            return Client(transport, timeout=30, init_timeout=INIT_TIMEOUT)
        logs = logs_dir()
        logs.mkdir(parents=True, exist_ok=True)
        transport = StdioTransport(
            sys.executable, ["-m", f"mcp_servers.{server}"], env={**self._env, **self._start_env()},
            cwd=str(PROJECT_ROOT), log_file=logs / f"mcp-{server}.log",
        )
        return Client(transport, timeout=30, init_timeout=INIT_TIMEOUT)

    @staticmethod
    def _start_env() -> dict[str, str]:
        """A fresh token for a server start, so its process can be found (``processes``); it
        travels in the transport's environment, so servers started at once are told apart."""
        return {processes.TOKEN_ENV: uuid.uuid4().hex}

    def _trust(self) -> ssl.SSLContext | None:
        return clinic_trust(self._env)

    async def _connected(self, server: str):
        client = self._clients.get(server)
        pid = self._pids.get(server)
        if client is not None and pid is not None and not processes.alive(pid):
            log.warning("the %s server (pid %d) exited; starting it again", server, pid)
            await self._stop(server)
            client = None
        if client is None:
            stale = self._stale.get(server)
            if stale is not None and processes.alive(stale):
                raise ToolClientError(f"the previous {server} server (pid {stale}) has not stopped")
            self._stale.pop(server, None)
            client = self._make_client(server)
            env = getattr(getattr(client, "transport", None), "env", None) or {}
            token = env.get(processes.TOKEN_ENV)
            try:
                await client.__aenter__()
            finally:  # registered even when the handshake fails, so a started process is stopped
                self._clients[server] = client
                found = processes.find_child(token) if token else None
                if found is not None:
                    self._pids[server] = found
        return client

    async def _stop(self, server: str, *, graceful: bool = False) -> None:
        """Stop ``server``'s client and process and wait until the process is gone. Given up on
        (the default), the process group is killed first; ``graceful`` lets the transport close
        stdin and wait (shutdown)."""
        client = self._clients.pop(server, None)
        pid = self._pids.pop(server, None)
        if pid is not None and not graceful:
            processes.kill(pid)
        if client is not None:
            try:
                await asyncio.wait_for(client.close(), STOP_TIMEOUT)
            except Exception:  # noqa: BLE001 - a dying server must not block the stop
                log.debug("error while closing the %s client", server, exc_info=True)
        if pid is None:
            return
        end = self._loop.time() + STOP_TIMEOUT
        while processes.alive(pid) and self._loop.time() < end:
            await asyncio.sleep(0.02)
        if processes.alive(pid):
            processes.kill(pid)
            log.error("the %s server (pid %d) did not stop; no new one starts while it lives", server, pid)
            self._stale[server] = pid

    def _give_up(self, server: str, why: str, *, said: bool = False) -> None:
        """Stop a server the client gave up on, and wait for it (caller holds the call lock);
        ``said``: the outcome tells the user why, so the log line stays out of their way."""
        log.log(logging.INFO if said else logging.WARNING, "giving up on the %s server (%s): stopping it", server, why)
        try:
            self._run(self._stop(server), 2 * STOP_TIMEOUT + 1)
        except Exception:  # noqa: BLE001 - reported; the next start checks the process again
            log.error("stopping the %s server did not finish", server, exc_info=True)

    def _refusal(self, server: str) -> str | None:
        """One line when an HTTP server turned this terminal away (token, certificate), else None."""
        if server not in self._http:
            return None
        from appliance.tools.host_refusal import refusal

        url, headers = self._http[server]
        try:
            trust = self._trust()
        except ToolClientError:
            return None
        found = refusal(url, headers, trust)
        if found:
            self.refused[server] = found
        else:
            self.refused.pop(server, None)
        return found

    def server_pid(self, server: str) -> int | None:
        """The running stdio server's process id, when known (for tests and status displays)."""
        return self._pids.get(server)

    def _run(self, coro, timeout: float):
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    def close(self) -> None:
        async def _close():
            for server in list(self._clients):
                await self._stop(server, graceful=True)  # stdin closed: each server exits on its own

        if self._loop.is_running():
            try:
                self._run(_close(), 3 * STOP_TIMEOUT + 5)
            except Exception:
                log.debug("MCP shutdown did not finish cleanly", exc_info=True)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    def __enter__(self) -> MCPToolBox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- calls ------------------------------------------------------------------------
    def call_server(self, server: str, tool: str, args: dict, deadline: float) -> ToolOutcome:
        sent = threading.Event()  # the request may have reached the server from here on

        async def _call():
            client = await self._connected(server)
            sent.set()
            return await client.call_tool_mcp(tool, args, timeout=deadline)

        with self._lock:
            try:
                result = self._run(_call(), deadline + INIT_TIMEOUT)  # first use also starts the server
            except TimeoutError:
                self._give_up(server, f"{tool} gave no answer in time")
                return ToolOutcome(error_type="timeout", message=f"{tool} did not answer within {deadline:.0f} s",
                                   uncertain=sent.is_set())
            except Exception as exc:  # noqa: BLE001 - every transport failure becomes an outcome
                refused = self._refusal(server)
                self._give_up(server, refused or f"{type(exc).__name__} during {tool}", said=bool(refused))
                if refused:
                    return ToolOutcome(error_type="service_unavailable", message=refused, uncertain=sent.is_set())
                kind = "timeout" if "timed out" in str(exc).lower() else \
                    "invalid_response" if isinstance(exc, (ValidationError, json.JSONDecodeError)) else "service_unavailable"
                return ToolOutcome(error_type=kind, message=f"{type(exc).__name__} reaching the {server} server",
                                   uncertain=sent.is_set())
            if getattr(result, "is_error", False):
                error_type, text = parse_tool_error(_error_text(result))
                return ToolOutcome(error_type=error_type, message=text)
            try:
                return ToolOutcome(result=_result_payload(result) or {})
            except (ValueError, TypeError):
                self._give_up(server, f"unreadable answer to {tool}")
                return ToolOutcome(error_type="invalid_response", message="the result was not JSON", uncertain=True)

    def call(self, tool: str, args: dict, deadline: float, *, idempotency_key: str | None = None,
             approval: dict | None = None) -> ToolOutcome:
        server = TOOL_SERVERS.get(tool)
        if server is None:
            return ToolOutcome(error_type="invalid_args", message=f"unknown tool {tool}")
        if server == "local":
            return self.local_tools[tool](args)
        if idempotency_key is not None:
            args = {**args, IDEMPOTENCY_KEY: idempotency_key}
        if approval is not None:
            args = {**args, APPROVAL: approval}
        return self.call_server(server, tool, args, deadline)

    def record_event(self, kind: str, patient_id: str | None, details: dict, deadline: float) -> ToolOutcome:
        return self.call_server("ehr", AUDIT_EVENT_TOOL, {"kind": kind, "patient_id": patient_id, "details": details},
                                deadline)

    def ping(self, server: str, timeout: float = 5.0) -> bool:
        """Whether a server answers a tools listing (starting it if needed); for status displays.

        A listing rather than MCP ping: fastmcp 4.1.2's servers answer ping with "Method not
        found", and a listing also proves the server's tools loaded.
        """
        async def _ping():
            client = await self._connected(server)
            return bool(await client.list_tools())

        with self._lock:
            try:
                return bool(self._run(_ping(), timeout + INIT_TIMEOUT))
            except Exception as exc:  # noqa: BLE001 - any failure means "not healthy"
                self._give_up(server, self._refusal(server) or f"{type(exc).__name__} on a health check")
                return False

    def start(self, timeout: float = INIT_TIMEOUT) -> dict[str, bool]:
        """Start (or reach) every server at once: start-up costs the slowest server, not the sum
        of all three. Returns which answered; one that did not is stopped, as a failed call's is."""
        async def _start():
            started = await asyncio.gather(*(self._connected(s) for s in SERVERS), return_exceptions=True)
            return {s: not isinstance(r, BaseException) for s, r in zip(SERVERS, started)}

        with self._lock:
            try:
                health = self._run(_start(), timeout + 5)
            except Exception:  # noqa: BLE001 - reported per server below
                health = dict.fromkeys(SERVERS, False)
            for server, ok in health.items():
                if not ok:
                    self._give_up(server, self._refusal(server) or "it did not start")
        return health

    def drug_names(self) -> list[str]:
        """The drug dictionary for INPUT_ASSEMBLY, from every server that offers one."""
        names: set[str] = set()
        for server in ("knowledge", "umls"):
            outcome = self.call_server(server, "drug_vocabulary", {}, 20.0)
            if outcome.ok and outcome.result:
                names.update(str(n) for n in outcome.result.get("items", outcome.result.get("names", [])))
            else:
                log.warning("no drug vocabulary from the %s server (%s)", server, outcome.error_type)
        return sorted(names)

    @staticmethod
    def _image_unavailable(args: dict) -> ToolOutcome:
        return ToolOutcome(error_type="service_unavailable", message="image analysis needs a model profile with a vision projector")
