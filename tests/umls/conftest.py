"""Fixtures for the UMLS store and server, over the starter database (``starter_db``, built once
per session in tests/conftest.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fastmcp import Client

from mcp_servers.umls import server as umls
from mcp_servers.umls.foundation import connect

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def db(starter_db):
    database = connect(starter_db, read_only=True)
    yield database
    database.close()


@pytest.fixture
def server(starter_db):
    umls.configure(starter_db)
    yield umls.mcp
    umls.configure(None)


def call(server, tool: str, args: dict | None = None):
    """Call one tool over an in-memory fastmcp Client and return its structured result."""
    async def run():
        async with Client(server) as client:
            return (await client.call_tool(tool, args or {})).data
    return asyncio.run(run())
