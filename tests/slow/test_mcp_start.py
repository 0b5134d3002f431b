"""The terminal's tool box starts its three stdio servers at once (``MCPToolBox.start``): start-up
costs the slowest server, not the sum, and each started process is still found by its own start
token (the one that lets a server the client gives up on be stopped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.setup.home import init_home
from appliance.tools import processes
from appliance.tools.mcp_client import SERVERS, MCPToolBox

pytestmark = pytest.mark.timeout(120)


def test_the_three_servers_start_at_once_and_each_process_is_its_own(appliance_home):
    init_home(progress=lambda message: None, with_model=False)
    with MCPToolBox(env={"APPLIANCE_HOME": str(appliance_home)}) as tools:
        assert tools.start() == dict.fromkeys(SERVERS, True)
        pids = {server: tools.server_pid(server) for server in SERVERS}
        assert None not in pids.values() and len(set(pids.values())) == 3, pids
        for server, pid in pids.items():  # the token found each server's own process
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            assert f"mcp_servers.{server}" in command and processes.alive(pid), (server, command)
        assert tools.call("get_patient_chart", {"patient_id": "abc-123"}, 10).ok
        assert tools.start() == dict.fromkeys(SERVERS, True)  # already running: the same processes
        assert {server: tools.server_pid(server) for server in SERVERS} == pids
