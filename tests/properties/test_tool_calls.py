"""Bad input by the hundred, at every MCP tool: arguments generated from each tool's published
input schema, plus wrong-type noise, called in process against a real data home. Every call ends
in a result or a contract ToolError, says nothing of the internals and, when refused, writes
nothing (``tool_calls.check_call``). The 10,000-call run is tests/slow/test_bad_input_thousands.py."""

from __future__ import annotations

import math

import pytest

from tests.properties.tool_calls import (
    FAST_CALLS,
    Tally,
    audit_chain_verifies,
    published_tools,
    run_tool,
    servers_on_a_fresh_home,
)

pytestmark = pytest.mark.timeout(240)
TOOLS = published_tools()
TALLY = Tally()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("APPLIANCE_HOME", str(home))
        with servers_on_a_fresh_home(home) as opened:
            yield opened


def test_every_server_publishes_its_tools():
    assert {server for server, *_ in TOOLS} == {"ehr", "umls", "knowledge"}
    assert len(TOOLS) >= 16


@pytest.mark.parametrize("tool", TOOLS, ids=[f"{s}.{t}" for s, t, *_ in TOOLS])
def test_generated_calls_end_in_a_result_or_a_clear_error_and_refusals_write_nothing(servers, tool):
    run_tool(*servers, TALLY, tool, math.ceil(FAST_CALLS / len(TOOLS)))
    assert TALLY.calls[f"{tool[0]}.{tool[1]}"] >= math.ceil(FAST_CALLS / len(TOOLS))


def test_the_calls_add_up(servers, capsys):
    """Run alone (or with some tools' tests deselected), it first makes the calls those tests
    would have made, so the totals and the audit chain are always checked."""
    per_tool = math.ceil(FAST_CALLS / len(TOOLS))
    for tool in TOOLS:
        missing = per_tool - TALLY.calls[f"{tool[0]}.{tool[1]}"]
        if missing > 0:
            run_tool(*servers, TALLY, tool, missing)
    with capsys.disabled():
        print("\n" + TALLY.table())
    assert TALLY.total >= FAST_CALLS
    assert audit_chain_verifies()  # every write and event the calls made is a whole link
