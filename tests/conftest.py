"""Shared fixtures and the ``--decode-samples`` option. Tests under tests/slow/ get the ``slow`` marker by folder."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")


# Prompts per schema in the decoding property test (tests/slow/test_fast_decoding.py): 30 keeps
# it under 2 minutes on two cores; run 500 (7,500 calls, ~22 minutes) whenever appliance/llm/ changes.
DEFAULT_DECODE_SAMPLES = 10
# Generated MCP tool calls in tests/slow/test_bad_input_thousands.py (about 2-3 minutes on two
# cores); the fast suite makes tests/properties/tool_calls.FAST_CALLS.
DEFAULT_BAD_INPUT_CALLS = 10_000


def _at_least_one(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def pytest_addoption(parser):
    parser.addoption(
        "--decode-samples", type=_at_least_one, default=DEFAULT_DECODE_SAMPLES, metavar="N",
        help=f"prompts per schema in the decoding property test (default {DEFAULT_DECODE_SAMPLES}; "
             "the full run is 500)",
    )
    parser.addoption(
        "--bad-input-calls", type=_at_least_one, default=DEFAULT_BAD_INPUT_CALLS, metavar="N",
        help=f"generated MCP tool calls in the slow bad-input run, spread over every tool (default "
             f"{DEFAULT_BAD_INPUT_CALLS:,})",
    )


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
