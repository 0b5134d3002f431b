"""The 'umls' MCP server in memory: every tool's happy and error paths over a fastmcp Client."""

from __future__ import annotations

import asyncio

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from mcp_servers.contracts import parse_tool_error
from mcp_servers.umls import server as umls
from tests.umls.conftest import call


def _error(server, tool, args) -> tuple[str, str]:
    with pytest.raises(ToolError) as exc:
        call(server, tool, args)
    return parse_tool_error(str(exc.value))


def test_tools_are_listed_read_only(server):
    async def run():
        async with Client(server) as client:
            return await client.list_tools()
    tools = {t.name: t for t in asyncio.run(run())}
    assert set(tools) == {"concept_search", "get_concept", "get_semantic_type", "drug_vocabulary",
                          "ground_text"}
    assert all(t.annotations.read_only_hint for t in tools.values())
    assert list(tools["concept_search"].input_schema["properties"]) == ["term", "max_results"]


def test_concept_search_returns_cui_and_snomed_in_one_call(server):
    result = call(server, "concept_search", {"term": "Tylenol"})
    best = result["candidates"][0]
    assert (best["cui"], best["snomed_code"], best["rxnorm"]) == ("C0000970", "387517004", "161")
    assert best["name"] == "Acetaminophen" and best["semantic_type"] == "Pharmacologic Substance"
    assert best["source"] == "CURATED" and best["matched_term"] == "Tylenol" and best["score"] == 0.9


def test_concept_search_respects_max_results(server):
    result = call(server, "concept_search", {"term": "diabetes", "max_results": 2})
    assert result["count"] == 2 == len(result["candidates"])


@pytest.mark.parametrize("args", [{"term": "   "}, {"term": ""}, {"term": "asthma", "max_results": 0},
                                  {"term": "asthma", "max_results": 26}, {"term": "x" * 201}])
def test_concept_search_invalid_args(server, args):
    assert _error(server, "concept_search", args)[0] == "invalid_args"


@pytest.mark.parametrize("tool, args, kind, field", [
    ("concept_search", {}, "missing_required_args", "term"),
    ("concept_search", {"term": "asthma", "max_results": "Tylenolqq"}, "invalid_args", "max_results"),
    ("concept_search", {"term": ["Tylenolqq"]}, "invalid_args", "term"),
    ("get_concept", {}, "missing_required_args", "cui"),
    ("get_concept", {"cui": 20538123}, "invalid_args", "cui"),
    ("get_semantic_type", {"cui": {"Tylenolqq": 1}}, "invalid_args", "cui"),
])
def test_argument_errors_carry_the_contract_error_type_and_no_values(server, tool, args, kind, field):
    found, text = _error(server, tool, args)
    assert found == kind and field in text
    assert "Tylenolqq" not in text and "20538123" not in text and "input" not in text.lower()


def test_concept_search_not_found(server):
    kind, text = _error(server, "concept_search", {"term": "qqzzxxvv"})
    assert kind == "not_found" and "qqzzxxvv" in text


def test_get_concept(server):
    concept = call(server, "get_concept", {"cui": "C0011860"})
    assert concept["name"] == "Type 2 diabetes mellitus" and concept["codes"]["snomed_code"] == "44054006"
    assert "T2DM" in {s["name"] for s in concept["synonyms"]}
    assert _error(server, "get_concept", {"cui": "C9999999"})[0] == "not_found"
    assert _error(server, "get_concept", {"cui": "diabetes"})[0] == "invalid_args"


def test_get_semantic_type(server):
    result = call(server, "get_semantic_type", {"cui": "C0043031"})
    assert result["is_drug"] is True and result["semantic_types"][0]["tui"] == "T121"
    assert _error(server, "get_semantic_type", {"cui": "C9999999"})[0] == "not_found"
    assert _error(server, "get_semantic_type", {"cui": ""})[0] == "invalid_args"


def test_drug_vocabulary(server):
    result = call(server, "drug_vocabulary")
    assert result["count"] == len(result["names"]) > 300
    assert {"Tylenol", "Warfarin", "Amoxicillin", "Eliquis"} <= set(result["names"])
    assert "Hypertension" not in result["names"]


def test_the_launcher_builds_the_database_lazily_in_the_data_home(appliance_home, monkeypatch):
    monkeypatch.setattr(umls.mcp, "run", lambda **kwargs: None)  # parse and configure, serve nothing
    try:
        assert umls.main([]) == 0
        assert not (appliance_home / "umls.sqlite").exists()
        result = call(umls.mcp, "concept_search", {"term": "HTN"})
    finally:
        umls.configure(None)
    assert result["candidates"][0]["cui"] == "C0020538"
    assert (appliance_home / "umls.sqlite").exists()


def test_a_server_given_no_database_is_unavailable():
    umls.configure(None)
    kind, text = _error(umls.mcp, "concept_search", {"term": "HTN"})
    assert kind == "service_unavailable" and "no database" in text
