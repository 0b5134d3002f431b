"""Drugs the knowledge base does not hold, from the real store to the clinician's answer: only
those drugs are named, and the server's caveat arrives word for word."""

from __future__ import annotations

import pytest

from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import ToolOutcome, deny_all
from mcp_servers.contracts import NOT_IN_DATABASE_CAVEATS, drugs_not_found
from tests.knowledge.knowledge_helpers import call

INTERACTION_CAVEAT = NOT_IN_DATABASE_CAVEATS["check_drug_interactions"]
SAFETY_CAVEAT = NOT_IN_DATABASE_CAVEATS["check_drug_safety"]


class InProcessKnowledge:
    """The real knowledge server, in process: each call goes through fastmcp to real SQLite."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    def call(self, tool: str, args: dict, deadline: float) -> ToolOutcome:
        self.calls.append((tool, args))
        result, error = call(tool, args)
        return ToolOutcome(result=result) if error is None else ToolOutcome(error_type=error[0], message=error[1])

    def drug_names(self) -> list[str]:
        return ["warfarin", "aspirin", "Zorblatin", "Quuxamab"]


def _turn(query: str):
    """A turn code routes and answers from the real server: no model call at all."""
    model = ScriptedModel({})
    tools = InProcessKnowledge()
    result = Agent(model, tools, Settings(), deny_all).run_turn(query)
    assert model.history == []
    return result, tools.calls


@pytest.mark.parametrize("names, unknown", [
    (["warfarin", "Zorblatin"], ["Zorblatin"]),
    (["Quuxamab", "Zorblatin"], ["Quuxamab", "Zorblatin"]),
])
def test_the_server_names_only_the_unknown_drugs_with_its_caveat(server, names, unknown):
    _, error = call("check_drug_interactions", {"drug_names": names})
    assert error[0] == "drug_not_in_database"
    assert list(drugs_not_found(error[1])) == unknown
    assert f"({INTERACTION_CAVEAT})" in error[1]


def test_an_unknown_drug_in_an_interaction_check_is_named_alone_with_the_caveat(server):
    result, calls = _turn("Does warfarin interact with Zorblatin?")
    assert calls == [("check_drug_interactions", {"drug_names": ["warfarin", "zorblatin"]})]
    assert ("zorblatin is not in this appliance's drug data (`appliance knowledge import openfda FILE` adds FDA "
            f"labels): no interaction information is available for it here ({INTERACTION_CAVEAT}).") in result.response
    assert "warfarin is not" not in result.response and "warfarin, zorblatin are" not in result.response


def test_an_unknown_drug_beside_known_ones_keeps_the_caveat_in_the_answer(server):
    result, _ = _turn("Any interaction between warfarin, aspirin and Zorblatin?")
    assert "- warfarin + aspirin: major. Effect:" in result.response or "- aspirin + warfarin: major. Effect:" in result.response
    assert "zorblatin is not in this appliance's drug data" in result.response
    assert result.response.count(INTERACTION_CAVEAT) == 1


def test_an_unknown_drug_in_a_safety_check_keeps_the_safety_caveat(server):
    result, calls = _turn("Boxed warnings for Quuxamab?")
    assert calls == [("check_drug_safety", {"drug_name": "quuxamab"})]
    assert result.response.startswith("quuxamab is not in this appliance's drug data")
    assert f"({SAFETY_CAVEAT})" in result.response
