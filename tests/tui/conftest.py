"""Async Pilot tests run on anyio's pytest plugin (installed with anyio) over asyncio: each
test module sets ``pytestmark = [pytest.mark.anyio, ...]``."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(autouse=True)
def private_data_home(tmp_path_factory, monkeypatch):
    """Every terminal test reads its clinician accounts (and anything else of the data home)
    from an empty private folder, never from the machine's own data home."""
    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path_factory.mktemp("home")))
