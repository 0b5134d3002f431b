"""Fixtures for the knowledge server tests: a real SQLite file built from the shipped content."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_servers.knowledge import server as knowledge
from mcp_servers.knowledge.store import ensure_database


@pytest.fixture
def knowledge_db(tmp_path) -> Path:
    path = tmp_path / "knowledge.sqlite"
    ensure_database(path)
    return path


@pytest.fixture
def server(knowledge_db):
    """The module-level server pointed at a fresh database; restored afterwards."""
    knowledge.configure(knowledge_db)
    yield knowledge
    knowledge.configure(None)

