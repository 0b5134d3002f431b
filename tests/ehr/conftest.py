"""Fixtures for the EHR tests: a real SQLite file per test, migrated and loaded with demo data."""

from __future__ import annotations

from pathlib import Path

import pytest

from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database
from mcp_servers.ehr import server as ehr


@pytest.fixture
def ehr_path(tmp_path) -> Path:
    path = tmp_path / "ehr.sqlite"
    ensure_database(path)
    return path


@pytest.fixture
def repo(ehr_path) -> EhrRepository:
    return EhrRepository(ehr_path)


@pytest.fixture
def server(ehr_path):
    """The 'ehr' MCP server pointed at ``ehr_path`` for the test."""
    ehr.configure(ehr_path)
    yield ehr.mcp
    ehr.configure(None)
