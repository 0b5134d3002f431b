"""Every server serves the agent's tools as their records (mcp_servers.contracts) define them:
the input schema a server publishes is the record's argument model, field for field, plus the
hidden parameters of a write."""

from __future__ import annotations

import asyncio
import importlib

import pytest
from fastmcp import Client

from mcp_servers.contracts import (
    ARG_SCHEMAS,
    AUDIT_EVENT_TOOL,
    FULL_DESCRIPTIONS,
    TOOL_SERVERS,
    TOOLS,
    WRITE_TOOLS,
    Tool,
    ToolArgs,
    register,
    tool_record,
)

SERVED = [name for name, tool in TOOLS.items() if tool.server != "local"]
# Tools a server offers that are not the model's: the approval code's audit event, and the
# vocabularies of the agent's drug dictionary.
NOT_THE_MODELS = {"ehr": {AUDIT_EVENT_TOOL}, "knowledge": {"drug_vocabulary"}}


def _tools(server: str) -> dict:
    async def listing():
        module = importlib.import_module(f"mcp_servers.{server}.server")
        async with Client(module.mcp) as client:
            return {t.name: t for t in await client.list_tools()}

    return asyncio.run(listing())


def _without_titles(schema):
    if isinstance(schema, dict):
        return {k: _without_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_without_titles(v) for v in schema]
    return schema


@pytest.mark.parametrize("server", ["ehr", "knowledge"])
def test_each_server_offers_its_records_tools(server):
    records = {name for name, s in TOOL_SERVERS.items() if s == server}
    assert set(_tools(server)) == records | NOT_THE_MODELS[server]


@pytest.mark.parametrize("name", SERVED)
def test_the_server_publishes_the_records_schema(name):
    record = tool_record(name)
    served = _tools(record.server)[name]
    expected = _without_titles(record.args.model_json_schema())
    expected.pop("description", None)  # the model's docstring is for the reader of the code
    actual = _without_titles(served.input_schema)
    for hidden in record.hidden_params:  # set by the agent's code after approval, never by the model
        prop = actual["properties"].pop(hidden)
        assert prop["anyOf"][-1] == {"type": "null"} and prop["default"] is None, hidden
        assert hidden not in actual["required"], hidden
    if record.nulls_optional:  # other clients may omit a nullable field; the agent's model requires it
        for field, prop in actual["properties"].items():
            if prop.pop("default", "absent") is None:
                actual["required"].insert(list(expected["properties"]).index(field), field)
    assert actual == expected
    assert list(actual["properties"]) == list(expected["properties"])  # decision-critical fields first
    hints = served.annotations
    assert hints.title == record.label
    assert hints.read_only_hint is (name not in WRITE_TOOLS)
    assert hints.destructive_hint in (None, False) and hints.open_world_hint is False


def test_the_server_refuses_what_the_model_refuses():
    """One call the model's schema refuses (a field beyond the model) is refused by the server."""
    async def call():
        module = importlib.import_module("mcp_servers.knowledge.server")
        async with Client(module.mcp) as client:
            return await client.call_tool_mcp("check_drug_safety", {"drug_name": "warfarin", "dose": "5 mg"})

    result = asyncio.run(call())
    assert result.is_error and "invalid_args" in result.content[0].text


def test_agent_schemas_keep_every_field_required():
    """The grammar needs every field required (nullable where it may be empty)."""
    for name, model in ARG_SCHEMAS.items():
        schema = model.model_json_schema()
        assert sorted(schema.get("required", [])) == sorted(schema["properties"]), name


def test_the_tables_are_read_off_the_records():
    assert list(ARG_SCHEMAS) == list(TOOLS)
    assert FULL_DESCRIPTIONS["get_patient_chart"].startswith("get_patient_chart(patient_id) - ")
    assert WRITE_TOOLS == {n for n, t in TOOLS.items() if t.approval != "none"}
    assert all(tool.needs_patient for name, tool in TOOLS.items() if name in WRITE_TOOLS)


def test_a_record_names_only_its_own_arguments():
    class Args(ToolArgs):
        query: str

    with pytest.raises(ValueError, match="not arguments"):
        Tool("t", "knowledge", Args, "T", "d", "e", approval="clinician", said_fields=("dosage",))
    with pytest.raises(ValueError, match="only a write"):
        Tool("t", "knowledge", Args, "T", "d", "e", sig=True)
    with pytest.raises(ValueError, match="registered already"):  # a tool is one record
        register(Tool("check_drug_safety", "knowledge", Args, "T", "d", "e"))
    assert tool_record("check_drug_safety").args.__name__ == "DrugSafetyArgs"


@pytest.mark.parametrize("server", ["knowledge", "umls"])
def test_drug_vocabulary_is_offered_for_the_agent_dictionary(server):
    assert "drug_vocabulary" in _tools(server)
