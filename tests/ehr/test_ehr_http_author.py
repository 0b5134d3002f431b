"""Over streamable HTTP (one EHR server shared by several terminals) each write is attributed
to the terminal's user, sent per request by the agent's MCP client, not to the server's own
$APPLIANCE_USER. A real HTTP server on localhost, in this process (uvicorn in a thread)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import uvicorn
from ehr_helpers import audit_rows, call
from fastmcp import Client

from appliance.bench.clinic import free_ports
from appliance.tools.mcp_client import MCPToolBox
from mcp_servers.ehr import server as ehr

PRESCRIPTION = {"patient_id": "abc-123", "medication_name": "Metformin", "dosage": "500 mg",
                "frequency": "twice daily", "notes": None}


def _free_port() -> int:
    return free_ports(1)  # below the ephemeral range: no client connection takes it first


@pytest.fixture
def http_ehr(ehr_path, monkeypatch):
    monkeypatch.setenv("APPLIANCE_USER", "server-operator")  # the server process's own user
    ehr.configure(ehr_path)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(ehr.mcp.http_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "HTTP server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        ehr.configure(None)


def _write_as(url: str, user: str | None) -> dict:
    env = {"APPLIANCE_MCP_EHR_URL": url, "APPLIANCE_USER": user or ""}
    with MCPToolBox(env=env) as box:
        outcome = box.call("prescribe_medication", PRESCRIPTION, 20)
    assert outcome.ok, outcome
    return outcome.result


def test_each_terminal_writes_under_its_own_name(http_ehr, ehr_path):
    first = _write_as(http_ehr, "dr.okafor")
    second = _write_as(http_ehr, "Dr. José Núñez")
    assert (first["author"], second["author"]) == ("dr.okafor", "Dr. José Núñez")
    actors = [row["actor"] for row in audit_rows(ehr_path) if row["tool"] == "prescribe_medication"]
    assert actors == ["dr.okafor", "Dr. José Núñez"]


def test_http_client_without_a_user_falls_back_to_the_servers_user(http_ehr, ehr_path):
    async def write(headers):
        from fastmcp.client.transports import StreamableHttpTransport

        async with Client(StreamableHttpTransport(http_ehr, headers=headers), timeout=20) as client:
            return (await client.call_tool("prescribe_medication", PRESCRIPTION)).data

    assert asyncio.run(write({}))["author"] == "server-operator"
    assert asyncio.run(write({"X-Appliance-User": "%0A%0D"}))["author"] == "server-operator"  # control characters
    assert _write_as(http_ehr, None)["author"] == "server-operator"
    assert asyncio.run(write({"X-Appliance-User": "nurse%20kim"}))["author"] == "nurse kim"


def test_stdio_and_in_memory_calls_keep_the_process_user(server, monkeypatch):
    monkeypatch.setenv("APPLIANCE_USER", "dr.local")
    assert call(server, "prescribe_medication", PRESCRIPTION)["author"] == "dr.local"
