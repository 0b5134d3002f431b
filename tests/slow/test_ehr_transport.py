"""The 'ehr' server over real transports: a stdio subprocess and streamable HTTP on localhost."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError

from ehr_db.setup import ensure_database
from mcp_servers.contracts import parse_tool_error

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "ehr.sqlite"
    ensure_database(path)
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "FASTMCP_CHECK_FOR_UPDATES": "off", "APPLIANCE_USER": "transport-test"}


async def _round_trip(client: Client) -> None:
    async with client:
        names = {t.name for t in await client.list_tools()}
        assert names == {"search_patient", "get_patient_chart", "prescribe_medication", "add_allergy",
                         "save_clinical_note"}
        found = (await client.call_tool("search_patient", {"name": "Maria Garcia"})).data
        pid = found["matches"][0]["patient_id"]
        chart = (await client.call_tool("get_patient_chart", {"patient_id": pid})).data
        assert chart["patient"]["name"] == "Maria Garcia"
        written = (await client.call_tool("prescribe_medication", {
            "patient_id": "abc-123", "medication_name": "Metformin", "dosage": "500 mg",
            "frequency": "twice daily", "notes": None})).data
        assert written["author"] == "transport-test"
        with pytest.raises(ToolError) as exc:
            await client.call_tool("get_patient_chart", {"patient_id": "zzz-999"})
        assert parse_tool_error(str(exc.value))[0] == "patient_not_found"


def test_stdio_round_trip(db):
    transport = StdioTransport(command=sys.executable, args=["-m", "mcp_servers.ehr", "--db", str(db)],
                               env=_env(), cwd=str(PROJECT))
    asyncio.run(_round_trip(Client(transport)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _wait_for(url: str, proc: subprocess.Popen, deadline: float) -> None:
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            async with Client(url) as client:
                await client.list_tools()
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def test_streamable_http_round_trip(db):
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_servers.ehr", "--db", str(db), "--http", f"127.0.0.1:{port}"],
        cwd=PROJECT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        asyncio.run(_wait_for(url, proc, time.monotonic() + 30))
        asyncio.run(_round_trip(Client(url)))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
