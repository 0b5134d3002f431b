"""The graph against the real MCP servers over stdio (scripted decisions, real data)."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import approve_all, deny_all
from appliance.tools.mcp_client import MCPToolBox
from common import locations
from ehr_db.setup import ensure_database
from tests.agent.helpers import approve_as_override

IA, IC, TS, TE, RC, DR, EH, SY = (
    "INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE",
    "RESULT_CLASSIFY", "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "SYNTHESIZE",
)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    mp = pytest.MonkeyPatch()
    mp.setenv("APPLIANCE_HOME", str(home))
    ensure_database(locations.ehr_db_path())
    yield home
    mp.undo()


@pytest.fixture(scope="module")
def tools(home):
    with MCPToolBox(env={"APPLIANCE_HOME": str(home)}) as box:
        yield box


def intent(tool):
    return {"intent": "TOOL_NEEDED", "task_summary": "Patient lookup.", "suggested_tool": tool}


def good():
    return {"quality": "success_rich", "brief_summary": "Found."}


def test_three_real_james_wilsons_ask_the_clinician(tools):
    model = ScriptedModel({IC: [intent("search_patient")], TS: [{"tool_name": "search_patient"}, {"name": "James Wilson"}],
                           RC: [good()]})
    result = Agent(model, tools, Settings(), deny_all, drugs=None).run_turn("Search for patient James Wilson")
    assert result.path == [IA, IC, TS, TE, RC, DR, SY]
    assert result.kind == "clarification" and result.response.startswith("I found 3 patients matching 'James Wilson'")
    assert result.response.count("James Wilson, born") == 3


def test_real_search_then_chart(tools):
    found = tools.call("search_patient", {"name": "Maria Garcia"}, 10).result["matches"][0]["patient_id"]
    model = ScriptedModel({IC: [intent("search_patient")],
                           TS: [{"tool_name": "search_patient"}, {"name": "Maria Garcia"},
                                {"tool_name": "get_patient_chart"}, {"patient_id": found}],
                           RC: [good(), good()], SY: ["Summary of Maria Garcia's chart."]})
    result = Agent(model, tools, Settings(), deny_all, drugs=None).run_turn("Find patient Maria Garcia and check her chart")
    assert result.path == [IA, IC, TS, TE, RC, DR, TS, TE, RC, DR, SY]
    assert [c["tool"] for c in result.tool_calls] == ["search_patient", "get_patient_chart"]
    assert all(c["error_type"] is None for c in result.tool_calls)
    assert SY not in [c.node for c in model.history]  # the chart's answer is code's words
    assert "Maria Garcia" in result.response and result.response.startswith("From the chart of")


def test_approved_write_reaches_the_real_record_and_a_rejected_one_does_not(tools):
    def meds():
        return tools.call("get_patient_chart", {"patient_id": "abc-123"}, 10).result["medications"]

    before = meds()

    def run(approver):
        # the words give the whole order: code's call, the clinician's words as written ("500mg")
        # (the answer is code's words: no result classification and no synthesis is scripted)
        model = ScriptedModel({IC: [intent("prescribe_medication")]})
        result = Agent(model, tools, Settings(), approver, drugs=None).run_turn("Prescribe metformin 500mg twice daily for abc-123")
        assert model.pending() == {}
        return result

    rejected = run(deny_all)
    assert rejected.tool_calls[0]["error_type"] == "rejected_by_user"
    assert "The record was changed" not in rejected.response
    assert meds() == before
    # A plain approval of a prescription that could not be fully checked is refused by the policy.
    plain = run(approve_all)
    assert plain.tool_calls[0]["error_type"] is not None
    assert meds() == before
    # With no drug data (drugs=None) the prescription cannot be fully checked: the clinician's
    # approval is an override with a reason and the password given again.
    approved = run(approve_as_override)
    assert approved.tool_calls[0]["error_type"] is None
    assert approved.response.startswith("Prescribed metformin 500mg twice daily")
    assert "The record was changed." in approved.response
    after = meds()
    assert len(after) == len(before) + 1
    new = [m for m in after if m not in before][0]
    assert (new["medication_name"].lower(), new["dosage"], new["frequency"]) == ("metformin", "500mg", "twice daily")


def test_unreachable_server_is_service_unavailable(home):
    with MCPToolBox(env={"APPLIANCE_HOME": str(home), "APPLIANCE_MCP_EHR_URL": "http://127.0.0.1:9/mcp"}) as box:
        outcome = box.call("search_patient", {"name": "x"}, 2)
        assert outcome.error_type in ("service_unavailable", "timeout")
        assert box.ping("ehr") is False
