"""Fixtures for the EHR tests: a real SQLite file per test, migrated and loaded with demo data."""

from __future__ import annotations

from pathlib import Path

import pytest

from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database


@pytest.fixture
def ehr_path(tmp_path) -> Path:
    path = tmp_path / "ehr.sqlite"
    ensure_database(path)
    return path


@pytest.fixture
def repo(ehr_path) -> EhrRepository:
    return EhrRepository(ehr_path)
