"""Fixtures for the UMLS store and server: one starter database per test session."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fastmcp import Client

from mcp_servers import umls
from mcp_servers.umls_schema import connect
from mcp_servers.umls_store import ensure_database

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def starter_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("umls") / "umls.sqlite"
    ensure_database(path)
    return path


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
