"""The MCP servers inside this process, behind the agent's own tool box: for checks that must use
the real servers and a real data home without starting subprocesses (``appliance selftest``,
tests).

Invariants:
- ``InProcessToolBox`` is ``MCPToolBox`` with fastmcp's in-memory transport instead of stdio:
  calls, results, errors and timeouts go through the same code.
- ``servers_on`` points each server module at one data home's database for the duration of the
  block and unconfigures them afterwards (a server given no path refuses every call), so a check
  can never reach the live record by accident.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from appliance.tools.mcp_client import SERVERS, MCPToolBox

DATABASES = {"ehr": "ehr.sqlite", "umls": "umls.sqlite", "knowledge": "knowledge.sqlite"}


class InProcessToolBox(MCPToolBox):
    """The agent's MCP tool box over the server objects of this process."""

    def _make_client(self, server: str):
        from fastmcp import Client

        return Client(importlib.import_module(f"mcp_servers.{server}.server").mcp, timeout=30)


@contextmanager
def servers_on(home: Path) -> Iterator[dict[str, Path]]:
    """Configure the three servers on ``home``'s databases (``DATABASES``); yields the paths."""
    paths = {server: home / DATABASES[server] for server in SERVERS}
    modules = {server: importlib.import_module(f"mcp_servers.{server}.server") for server in SERVERS}
    for server, module in modules.items():
        module.configure(paths[server])
    try:
        yield paths
    finally:
        for module in modules.values():
            module.configure(None)
