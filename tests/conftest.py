"""Shared fixtures. Tests under tests/slow/ get the ``slow`` marker by folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "slow" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def appliance_home(tmp_path, monkeypatch) -> Path:
    """A private, empty APPLIANCE_HOME for one test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("APPLIANCE_HOME", str(home))
    return home
