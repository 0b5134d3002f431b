"""Bad input by the thousand: ``--bad-input-calls`` (default 10,000) generated calls
spread over every tool of the three MCP servers, in process against a real data home, with the
checks of tests/properties/tool_calls.py; then the count per tool and in total is printed and
required. The fast suite runs the same property with fewer calls (tests/properties)."""

from __future__ import annotations

import math

import pytest

from tests.properties.cli_argv import cli_on_a_fresh_home, generated_runs
from tests.properties.tool_calls import (
    Tally,
    audit_chain_verifies,
    published_tools,
    run_tool,
    servers_on_a_fresh_home,
)

pytestmark = pytest.mark.timeout(1800)
TOOLS = published_tools()
COMMAND_LINES = 1_500


@pytest.mark.heavy
def test_ten_thousand_generated_calls_across_every_tool(tmp_path, monkeypatch, request, capsys):
    wanted = request.config.getoption("--bad-input-calls")
    per_tool = math.ceil(wanted / len(TOOLS))
    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path))
    tally = Tally()
    with servers_on_a_fresh_home(tmp_path) as (servers, counts):
        for tool in TOOLS:
            run_tool(servers, counts, tally, tool, per_tool)
        assert audit_chain_verifies()
    with capsys.disabled():
        print("\n" + tally.table())
    assert all(tally.calls[f"{s}.{t}"] >= per_tool for s, t, *_ in TOOLS)
    assert tally.total >= wanted


@pytest.mark.heavy
def test_generated_command_lines_by_the_thousand(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    with cli_on_a_fresh_home(tmp_path, monkeypatch) as files:
        codes = generated_runs(files, COMMAND_LINES)
    with capsys.disabled():
        print(f"\ncommand lines: {sum(codes.values())} runs, exit codes {dict(sorted(codes.items()))}")
    assert sum(codes.values()) >= COMMAND_LINES
