"""Every server exposes the agent's tools exactly as mcp_servers.contracts defines them."""

from __future__ import annotations

import asyncio
import importlib

import pytest
from fastmcp import Client

from mcp_servers.contracts import (
    APPROVAL,
    ARG_SCHEMAS,
    IDEMPOTENCY_KEY,
    SIG,
    SIG_TOOLS,
    TOOL_SERVERS,
    WRITE_TOOLS,
)

SERVERS = sorted({s for s in TOOL_SERVERS.values() if s != "local"}) + ["umls"]


def _normalise(prop: dict) -> dict:
    """The parts of a property schema the agent relies on."""
    keep = {k: prop[k] for k in ("type", "enum", "minLength", "maxLength", "minItems", "maxItems") if k in prop}
    if "anyOf" in prop:
        keep["anyOf"] = [_normalise(p) for p in prop["anyOf"]]
    if "items" in prop:
        keep["items"] = _normalise(prop["items"])
    return keep


async def _tools(server: str) -> dict:
    module = importlib.import_module(f"mcp_servers.{server}.server")
    async with Client(module.mcp) as client:
        return {t.name: t for t in await client.list_tools()}


@pytest.mark.parametrize("server", SERVERS)
def test_server_tools_match_the_contracts(server):
    tools = asyncio.run(_tools(server))
    expected = [name for name, s in TOOL_SERVERS.items() if s == server]
    assert set(expected) <= set(tools), f"{server} lacks {set(expected) - set(tools)}"
    for name in expected:
        schema = tools[name].input_schema
        contract = ARG_SCHEMAS[name].model_json_schema()
        # A write tool has two parameters more, set by code and never by the model.
        extra = [IDEMPOTENCY_KEY, APPROVAL] if name in WRITE_TOOLS else []
        extra += [SIG] if name in SIG_TOOLS else []  # and an order's sig, also set by code
        assert list(schema["properties"]) == list(contract["properties"]) + extra, name
        assert IDEMPOTENCY_KEY not in schema.get("required", []), name
        assert APPROVAL not in schema.get("required", []), name
        # The agent's schema requires every field; a server may let other clients omit a
        # nullable one (it then defaults to null), never a field the agent needs a value for.
        assert set(schema.get("required", [])) <= set(contract["required"]), name
        for field in set(contract["required"]) - set(schema.get("required", [])):
            assert _nullable(contract["properties"][field]), f"{name}.{field} is not nullable in the contract"
            assert schema["properties"][field].get("default", "absent") is None, f"{name}.{field}"
        for field, prop in contract["properties"].items():
            assert _normalise(schema["properties"][field]) == _normalise(prop), f"{name}.{field}"


def _nullable(prop: dict) -> bool:
    return any(p.get("type") == "null" for p in prop.get("anyOf", []))


def test_agent_schemas_keep_every_field_required():
    """The grammar needs every field required (nullable where it may be empty)."""
    for name, model in ARG_SCHEMAS.items():
        schema = model.model_json_schema()
        assert sorted(schema.get("required", [])) == sorted(schema["properties"]), name


@pytest.mark.parametrize("server", ["knowledge", "umls"])
def test_drug_vocabulary_is_offered_for_the_agent_dictionary(server):
    tools = asyncio.run(_tools(server))
    assert "drug_vocabulary" in tools
