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


def _turn(query: str, tool: str, args: dict, answer: str, quality: str):
    script = {
        "INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "Drug lookup.", "suggested_tool": tool}],
        "TOOL_SELECT": [{"tool_name": tool}, args],
        "RESULT_CLASSIFY": [{"quality": quality, "brief_summary": "Checked."}],
        "SYNTHESIZE": [answer],
    }
    model = ScriptedModel(script)
    result = Agent(model, InProcessKnowledge(), Settings(), deny_all).run_turn(query)
    assert model.pending() == {}
    return result, model.history[-1].messages[-1].content


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
    result, prompt = _turn("Does warfarin interact with Zorblatin?", "check_drug_interactions",
                           {"drug_names": ["warfarin", "Zorblatin"]},
                           "Zorblatin could not be checked.", "error_fatal")  # the model drops the caveat
    message = "Zorblatin was not found in the drug database (this does not mean the combination is safe)."
    assert message in prompt and "warfarin, Zorblatin" not in prompt
    assert result.response == f"Zorblatin could not be checked.\n\n{message}"  # code keeps the caveat


def test_an_unknown_drug_beside_known_ones_keeps_the_caveat_in_the_answer(server):
    result, prompt = _turn("Any interaction between warfarin, aspirin and Zorblatin?", "check_drug_interactions",
                           {"drug_names": ["warfarin", "aspirin", "Zorblatin"]},
                           "Warfarin with aspirin is a major bleeding-risk interaction.", "success_rich")
    assert INTERACTION_CAVEAT in prompt and "Zorblatin" in prompt
    assert result.response.endswith(
        "Zorblatin was not found in the drug database (this does not mean the combination is safe).")


def test_an_answer_that_keeps_the_caveat_is_not_repeated(server):
    answer = "Zorblatin is not in the drug database; this does not mean the combination is safe."
    result, _ = _turn("Check Zorblatin against warfarin", "check_drug_interactions",
                      {"drug_names": ["warfarin", "Zorblatin"]}, answer, "error_fatal")
    assert result.response == answer


def test_an_unknown_drug_in_a_safety_check_keeps_the_safety_caveat(server):
    result, _ = _turn("Boxed warnings for Quuxamab?", "check_drug_safety", {"drug_name": "Quuxamab"},
                      "Quuxamab is not in the database.", "error_fatal")
    assert result.response.endswith(f"Quuxamab was not found in the drug database ({SAFETY_CAVEAT}).")
