"""The UMLS server's ground_text tool in memory: the deterministic part without a model, the whole
loop when a launcher gave the server a grounder, and the contract's errors."""

from __future__ import annotations

import asyncio

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from appliance.grounding import SearchUnavailable
from appliance.grounding.grounder import make_grounder
from appliance.grounding.loop import NODE_EVALUATE, NODE_EXTRACT
from appliance.grounding.search import MCPSearch
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import ToolOutcome
from mcp_servers.contracts import parse_tool_error
from mcp_servers.umls import server as umls

TEXT = "Taking Tylenol for sugar diabetes; no blood thinner"


@pytest.fixture
def server(starter_db):
    umls.configure(starter_db)
    yield umls.mcp
    umls.configure(None)
    umls.configure_grounder(None)


def call(server, args: dict):
    async def run():
        async with Client(server) as client:
            return (await client.call_tool("ground_text", args)).data
    return asyncio.run(run())


def error(server, args: dict) -> tuple[str, str]:
    with pytest.raises(ToolError) as exc:
        call(server, args)
    return parse_tool_error(str(exc.value))


def test_ground_text_is_listed_read_only(server):
    async def run():
        async with Client(server) as client:
            return {t.name: t for t in await client.list_tools()}
    tool = asyncio.run(run())["ground_text"]
    assert tool.annotations.read_only_hint and list(tool.input_schema["properties"]) == ["text", "entities"]


def test_without_a_model_given_entities_get_the_exact_path_or_their_candidates(server):
    data = call(server, {"text": TEXT, "entities": [
        {"text": "Tylenol", "type": "Medication", "search_term": "acetaminophen"},
        {"text": "sugar diabetes", "type": "Condition", "search_term": "diabetes"},
        {"text": "blood thinner", "type": "Medication"},
        {"text": "aspirin", "type": "Medication"},
    ]})
    tylenol, diabetes, thinner = data["entities"]
    assert (tylenol["method"], tylenol["cui"], tylenol["snomed_code"]) == ("exact", "C0000970", "387517004")
    assert (diabetes["method"], diabetes["review_reason"], diabetes["confidence"]) == \
        ("expert_review", "needs_model_evaluation", 0.0)
    assert diabetes["candidates"][0]["cui"] == "C0011847" and len(diabetes["candidates"]) == 5
    assert [c["index"] for c in diabetes["candidates"]] == [1, 2, 3, 4, 5]
    assert (diabetes["candidates"][1]["cui"], diabetes["candidates"][1]["snomed_code"]) == ("C0011849", "73211009")
    assert thinner["review_reason"] == "no_candidates" and TEXT[slice(*thinner["span"])] == "blood thinner"
    assert data["stats"]["dropped_entities"] == 1 and data["stats"]["model_calls"] == 0


def test_without_a_model_and_without_entities_the_caller_is_told_what_to_pass(server):
    kind, text = error(server, {"text": TEXT})
    assert kind == "invalid_args" and "pass entities" in text
    assert error(server, {"text": "   ", "entities": [{"text": "x", "type": "Condition"}]})[0] == "invalid_args"
    assert error(server, {"text": "x" * 4001})[0] == "invalid_args"
    assert error(server, {"text": TEXT, "entities": [{"text": "Tylenol", "type": "Drug"}]})[0] == "invalid_args"


def test_with_a_model_the_server_runs_the_whole_loop(server, starter_db):
    model = ScriptedModel({
        NODE_EXTRACT: [{"entities": [{"text": "Tylenol", "type": "Medication", "search_term": "acetaminophen"},
                                     {"text": "sugar diabetes", "type": "Condition", "search_term": "diabetes"}]}],
        NODE_EVALUATE: [{"decision": "select", "candidate": "2", "confidence": "high", "refine_terms": []},
                        {"decision": "select", "candidate": "1", "confidence": "moderate", "refine_terms": []}],
    })
    umls.configure_grounder(make_grounder(model, starter_db))
    data = call(server, {"text": TEXT})
    assert [(e["method"], e["cui"]) for e in data["entities"]] == [("exact", "C0000970"),
                                                                  ("model_selected", "C0011849")]
    # given entities skip the extraction call but are still evaluated by the model
    data = call(server, {"text": TEXT, "entities": [{"text": "sugar diabetes", "type": "Condition",
                                                     "search_term": "diabetes"}]})
    assert (data["entities"][0]["method"], data["entities"][0]["confidence"]) == ("model_selected", 0.6)
    assert model.pending() == {}


class FakeToolBox:
    def __init__(self, outcome: ToolOutcome):
        self.outcome, self.calls = outcome, []

    def call_server(self, server, tool, args, deadline):
        self.calls.append((server, tool, args))
        return self.outcome


def test_the_mcp_search_reads_candidates_and_maps_failures():
    box = FakeToolBox(ToolOutcome(result={"term": "x", "candidates": [{"cui": "C1"}], "count": 1}))
    assert MCPSearch(box).search("Tylenol", 5) == [{"cui": "C1"}]
    assert box.calls == [("umls", "concept_search", {"term": "Tylenol", "max_results": 5})]
    assert MCPSearch(FakeToolBox(ToolOutcome(error_type="not_found", message="no"))).search("x", 5) == []
    for bad in (ToolOutcome(error_type="timeout", message="late"), ToolOutcome(result={"candidates": "junk"})):
        with pytest.raises(SearchUnavailable):
            MCPSearch(FakeToolBox(bad)).search("x", 5)
