"""Shared fixtures and the ``--decode-samples`` option. Tests under tests/slow/ get the ``slow`` marker by folder."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

# The network guard (tests/netguard/sitecustomize.py): this process and every Python process the
# tests start refuse any connection or lookup off loopback, and log it; the session fails if the
# log is not empty at the end, even when the code under test swallowed the error.
NETGUARD = Path(__file__).resolve().parent / "netguard"
NETGUARD_LOG = Path(os.environ.setdefault(
    "APPLIANCE_NETGUARD_LOG", str(Path(os.environ.get("TMPDIR", "/tmp")) / f"appliance-netguard-{os.getpid()}.log")))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(NETGUARD), os.environ.get("PYTHONPATH")) if p)
NETGUARD_LOG.unlink(missing_ok=True)


def _install_guard() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("appliance_netguard", NETGUARD / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # installs itself: APPLIANCE_NETGUARD_LOG is set


_install_guard()


def pytest_sessionfinish(session, exitstatus):
    if NETGUARD_LOG.exists() and NETGUARD_LOG.read_text().strip():
        print(f"\nnetwork access during the tests (tests/netguard):\n{NETGUARD_LOG.read_text()}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# Prompts per schema in the decoding property test (tests/slow/test_fast_decoding.py): 6 (102
# calls; the fewest that give every schema both temperatures at both the node's limit and a
# tighter one) keeps `./build.sh test` under 8 minutes on two cores; run 500 (8,500 calls)
# whenever appliance/llm/ changes.
DEFAULT_DECODE_SAMPLES = 6
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


@pytest.fixture(scope="session")
def starter_db(tmp_path_factory) -> Path:
    """The starter UMLS database, built once per session (grounding and UMLS tests read it)."""
    from mcp_servers.umls.store import ensure_database

    path = tmp_path_factory.mktemp("umls") / "umls.sqlite"
    ensure_database(path)
    return path
