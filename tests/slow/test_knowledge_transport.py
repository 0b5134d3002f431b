"""The knowledge server over real transports: a stdio subprocess and streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from mcp_servers.contracts import parse_tool_error
from mcp_servers.knowledge_store import ensure_database

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "FASTMCP_CHECK_FOR_UPDATES": "off"}


async def _exercise(client: Client) -> None:
    safety = await client.call_tool("check_drug_safety", {"drug_name": "Tylenol"})
    assert safety.structured_content["drug"] == "acetaminophen"
    pair = await client.call_tool("check_drug_interactions", {"drug_names": ["warfarin", "Advil"]})
    assert pair.structured_content["interactions"][0]["severity"] == "major"
    trials = await client.call_tool("find_clinical_trials", {"condition": "atrial fibrillation", "status": "active"})
    assert trials.structured_content["trials"][0]["nct_id"] == "NCT-DEMO-0003"
    vocabulary = await client.call_tool("drug_vocabulary", {})
    assert "Coumadin" in vocabulary.structured_content["names"]
    unknown = await client.call_tool("check_drug_safety", {"drug_name": "Zorblax"}, raise_on_error=False)
    assert unknown.is_error
    assert parse_tool_error(unknown.content[0].text)[0] == "drug_not_in_database"


def test_stdio_round_trip(tmp_path):
    db = tmp_path / "knowledge.sqlite"
    ensure_database(db)
    transport = StdioTransport(
        sys.executable, ["-m", "mcp_servers.knowledge", "--db", str(db)], env=ENV, cwd=str(ROOT),
        log_file=tmp_path / "stderr.log",
    )

    async def run():
        async with Client(transport, timeout=30) as client:
            await _exercise(client)

    asyncio.run(run())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_streamable_http_round_trip(tmp_path):
    db = tmp_path / "knowledge.sqlite"
    ensure_database(db)
    port = _free_port()
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_servers.knowledge", "--db", str(db), "--http", f"127.0.0.1:{port}"],
        cwd=ROOT, env=ENV, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    async def wait_until_up() -> None:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            try:
                async with Client(url, timeout=5) as client:
                    await client.list_tools()
                    return
            except Exception:  # noqa: BLE001 - not listening yet
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def run():
        await wait_until_up()
        async with Client(url, timeout=30) as client:
            await _exercise(client)

    try:
        asyncio.run(run())
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
