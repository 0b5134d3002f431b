"""Fixtures for grounding: the real UMLS starter database (built once per session) and an
in-process search over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.grounding import InProcessSearch
from mcp_servers.umls_store import ensure_database


@pytest.fixture(scope="session")
def starter_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("umls-grounding") / "umls.sqlite"
    ensure_database(path)
    return path


@pytest.fixture
def search(starter_db):
    with InProcessSearch(starter_db) as s:
        yield s
