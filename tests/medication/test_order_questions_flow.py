"""A change without the values it needs is a question before any approval, on the real record
(in-process MCP servers over real SQLite, a scripted model that is never asked to pick the
call): "increase metformin by 500 mg" asks "to what dose?" with the order as charted (code never
computes a dose the clinician did not write), and nothing is written or asked to approve."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from tests.medication.test_order_change_flow import (
    TS,
    InProcessToolBox,
    _orders,
    _script,
    home,
)

__all__ = ["home"]  # the fixture, shared with the change flow's tests
pytestmark = pytest.mark.timeout(120)


def _ask(query: str, patient: str):
    asked: list = []

    def approver(tool, args, safety=None):
        asked.append((tool, args))
        raise AssertionError("a question is never put to approval")

    model = ScriptedModel(_script("change_medication_order"))
    tools = InProcessToolBox()
    try:
        result = Agent(model, tools, Settings(), approver).run_turn(query, patient_id=patient)
    finally:
        tools.close()
    assert TS not in [h.node for h in model.history] and asked == []
    return result


@pytest.mark.parametrize("query", ["increase metformin by 500 mg", "increase metformin by 500 mg bid",
                                   "double the metformin"])
def test_a_relative_change_asks_to_what_dose_with_the_charted_order(home, query):
    before = _orders("abc-123", "metformin")
    result = _ask(query, "abc-123")
    assert "To what dose? The chart has Metformin 500 mg twice daily" in result.response, result.response
    assert result.tool_calls[-1]["tool"] == "change_medication_order"
    assert result.tool_calls[-1]["error_type"] == "invalid_args"
    assert _orders("abc-123", "metformin") == before  # nothing written
