"""Async Pilot tests run on anyio's pytest plugin (installed with anyio) over asyncio: each
test module sets ``pytestmark = [pytest.mark.anyio, ...]``."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"
