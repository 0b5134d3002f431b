"""The 'umls' server over real transports: a stdio subprocess and streamable HTTP on localhost."""

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

from mcp_servers.contracts import parse_tool_error
from mcp_servers.umls_store import ensure_database

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "umls.sqlite"
    ensure_database(path)
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "FASTMCP_CHECK_FOR_UPDATES": "off"}


async def _round_trip(client: Client) -> None:
    async with client:
        names = {t.name for t in await client.list_tools()}
        assert names == {"concept_search", "get_concept", "get_semantic_type", "drug_vocabulary"}
        found = (await client.call_tool("concept_search", {"term": "acetaminophen", "max_results": 3})).data
        best = found["candidates"][0]
        assert (best["cui"], best["snomed_code"], best["score"]) == ("C0000970", "387517004", 1.0)
        concept = (await client.call_tool("get_concept", {"cui": "C0019134"})).data
        assert concept["name"] == "Heparin" and concept["codes"]["rxnorm"] == "5224"
        with pytest.raises(ToolError) as exc:
            await client.call_tool("concept_search", {"term": "qqzzxxvv"})
        assert parse_tool_error(str(exc.value))[0] == "not_found"


def test_stdio_round_trip(db):
    transport = StdioTransport(command=sys.executable, args=["-m", "mcp_servers.umls", "--db", str(db)],
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
        [sys.executable, "-m", "mcp_servers.umls", "--db", str(db), "--http", f"127.0.0.1:{port}"],
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
