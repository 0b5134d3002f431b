"""Fixtures for grounding: an in-process search over the real UMLS starter database
(``starter_db``, built once per session in tests/conftest.py)."""

from __future__ import annotations

import pytest

from appliance.grounding import InProcessSearch


@pytest.fixture
def search(starter_db):
    with InProcessSearch(starter_db) as s:
        yield s
