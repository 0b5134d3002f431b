"""Faults of the real MCP server processes during real turns: a server that crashes,
hangs past its deadline or answers garbage. The turn completes with the clinician-facing error
template, the error handler's retry and skip rules apply, the server the client gave up on is
stopped at once, and the next call runs on a new server.

Turns use the scripted model (the decisions) and the real EHR server over stdio (the faults).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools import processes
from appliance.tools.base import deny_all
from appliance.tools.mcp_client import INIT_TIMEOUT, MCPToolBox
from common import locations
from common.locations import PROJECT_ROOT
from ehr_db.setup import ensure_database

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(180)]  # fault drills: the heavy tier

DEADLINE = 2.0
CHART = "get_patient_chart"
QUESTION = "Review the chart of abc-123"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path))
    ensure_database(locations.ehr_db_path())
    locations.logs_dir().mkdir(parents=True, exist_ok=True)
    return tmp_path


class Watched(MCPToolBox):
    """The real tool box, with a fault applied to the EHR server just before chosen chart calls,
    and the server's pid recorded before and after every call."""

    def __init__(self, env, fault=None, on_calls=(1,)):
        super().__init__(env)
        self.fault, self.on_calls, self.chart_calls = fault, set(on_calls), 0
        self.pids: list[tuple[int | None, int | None]] = []

    def call(self, tool, args, deadline, **kw):
        if tool == CHART:
            self.chart_calls += 1
            if self.fault and self.chart_calls in self.on_calls:
                self.fault(self)
        before = self.server_pid("ehr")
        outcome = super().call(tool, args, deadline, **kw)
        self.pids.append((before, self.server_pid("ehr")))
        return outcome


def stall(box):
    if box.server_pid("ehr") is None:
        assert box.ping("ehr")  # the server given up on last time: start the next one to stall it
    os.kill(box.server_pid("ehr"), signal.SIGSTOP)  # hangs: it neither answers nor dies


def crash_mid_call(box):
    pid = box.server_pid("ehr")
    os.kill(pid, signal.SIGSTOP)  # the request waits in the pipe ...
    threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()  # ... and the server dies under it


def chart_script(retries: int = 1) -> dict:
    """The model's decisions; code classifies every result and says the answer (no
    RESULT_CLASSIFY or SYNTHESIZE reply: a call to either would fail the turn)."""
    return {
        "INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "Chart review.", "suggested_tool": CHART}],
        "TOOL_SELECT": [{"tool_name": CHART}, {"patient_id": "abc-123"}],
        "ERROR_HANDLER": [{"strategy": "retry_same", "reasoning": "temporary"}] * retries,
    }


def run_turn(box, script):
    model = ScriptedModel(script)
    result = Agent(model, box, Settings(tool_deadline_seconds=DEADLINE), deny_all, drugs=None).run_turn(QUESTION)
    return result, model


def classified(result) -> list[str]:
    """What RESULT_CLASSIFY (code) read each time: the pre-formatted result or error."""
    return [t.output["brief_summary"] for t in result.trace if t.node == "RESULT_CLASSIFY"]


def chart_answer(result, model) -> bool:
    """The turn's answer is code's reading of the chart, with no model call to classify or say
    it, and every retry the model was asked to choose was asked for."""
    return (result.response.startswith("From the chart of John Smith")
            and {c.node for c in model.history}.isdisjoint({"RESULT_CLASSIFY", "SYNTHESIZE"})
            and "ERROR_HANDLER" not in model.pending())


def warm(box) -> int:
    assert box.call("search_patient", {"name": "Smith"}, 10).ok
    return box.server_pid("ehr")


@pytest.mark.parametrize("fault,error_type,template", [
    (crash_mid_call, "service_unavailable", "The Patient Record is currently unavailable."),
    (stall, "timeout", "The Patient Record was temporarily unavailable. Please try again shortly."),
], ids=["crash mid-call", "hang past the deadline"])
def test_a_fault_mid_turn_is_reported_retried_and_the_server_replaced(home, fault, error_type, template):
    with Watched({"APPLIANCE_HOME": str(home)}, fault) as box:
        first = warm(box)
        result, model = run_turn(box, chart_script())
        assert result.path == ["INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE", "RESULT_CLASSIFY",
                               "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "TOOL_SELECT", "TOOL_EXECUTE",
                               "RESULT_CLASSIFY", "DETERMINISTIC_ROUTER", "SYNTHESIZE"]
        assert [c["error_type"] for c in result.tool_calls] == [error_type, None]
        assert template in classified(result)[0]  # the template, never the raw transport text
        assert "reaching the ehr server" not in " ".join(classified(result)) + result.response
        assert chart_answer(result, model)
        # Given up on at once (no server after the failed call), a new one for the retry.
        assert box.pids[1] == (first, None) and box.pids[2][1] not in (None, first)
        assert not processes.alive(first)


def test_a_server_that_keeps_hanging_is_skipped_after_the_retry_limit(home):
    with Watched({"APPLIANCE_HOME": str(home)}, stall, on_calls=(1, 2, 3)) as box:
        warm(box)
        result, model = run_turn(box, chart_script(retries=2))
        assert [c["error_type"] for c in result.tool_calls] == ["timeout"] * 3
        skip = result.trace[-2]
        assert skip.node == "ERROR_HANDLER" and skip.output == {"action": "skip"}
        assert "ERROR_HANDLER" not in model.pending() and "SYNTHESIZE" not in {c.node for c in model.history}
        assert "Unable to complete the Patient Record after multiple attempts." in result.response
        assert box.call(CHART, {"patient_id": "abc-123"}, 10).ok  # the next call: a fresh server


def test_a_server_killed_between_turns_is_started_again_for_the_next_call(home):
    with Watched({"APPLIANCE_HOME": str(home)}) as box:
        first = warm(box)
        os.kill(first, signal.SIGKILL)
        assert processes.wait_gone(first, 5)
        result, _ = run_turn(box, chart_script(retries=0))
        assert [c["error_type"] for c in result.tool_calls] == [None]
        assert box.server_pid("ehr") not in (None, first)


class Garbled(Watched):
    """The real EHR server with a garbage answer to its first chart call (tests/slow/fault_server.py)."""

    def _make_client(self, server):
        from fastmcp import Client
        from fastmcp.client.transports import StdioTransport

        transport = StdioTransport(sys.executable, [str(PROJECT_ROOT / "tests" / "slow" / "fault_server.py")],
                                   env={**self._env, **self._start_env()}, cwd=str(PROJECT_ROOT),
                                   log_file=locations.logs_dir() / "mcp-fault.log")
        return Client(transport, timeout=30, init_timeout=INIT_TIMEOUT)


@pytest.mark.parametrize("mode", ["answer", "text"])
def test_a_garbage_answer_mid_turn_is_unreadable_and_the_server_replaced(home, tmp_path, mode):
    env = {"APPLIANCE_HOME": str(home), "FAULT_GARBAGE_TOOLS": CHART, "FAULT_GARBAGE": mode,
           "FAULT_GARBAGE_ONCE": str(tmp_path / f"garbled-{mode}")}
    with Garbled(env) as box:
        first = warm(box)
        result, model = run_turn(box, chart_script())
        assert [c["error_type"] for c in result.tool_calls] == ["invalid_response", None]
        assert "The Patient Record returned a response that could not be read." in classified(result)[0]
        assert box.pids[1] == (first, None) and not processes.alive(first)
        assert chart_answer(result, model)


def test_junk_lines_between_answers_are_tolerated(home, tmp_path):
    env = {"APPLIANCE_HOME": str(home), "FAULT_GARBAGE_TOOLS": CHART, "FAULT_GARBAGE": "lines"}
    with Garbled(env) as box:
        first = warm(box)
        outcome = box.call(CHART, {"patient_id": "abc-123"}, DEADLINE)
        assert outcome.ok and outcome.result["patient"]["patient_id"] == "abc-123"
        assert box.server_pid("ehr") == first
