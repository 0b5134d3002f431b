"""Adding a read-only tool is one record plus its server function (docs/design.md §12, "Adding
a tool"): a test tool registered with ``contracts.register`` and served on the real knowledge
server with ``serving.serves`` is listed, chosen, filled, called, labelled and scrubbed by the
agent, with no other table edited.

The scenario runs in a fresh interpreter: the record is registered before the agent's modules
load, as a record in ``contracts/catalogue.py`` would be, so the prompts the nodes build when
they load list it (this test process has loaded them already, without it)."""

from __future__ import annotations

import json
import subprocess
import sys

from common.locations import PROJECT_ROOT

SCENARIO = r'''
import asyncio, json

from fastmcp import Client

from mcp_servers.contracts import Name, Tool, ToolArgs, register
from mcp_servers.knowledge import server as knowledge
from mcp_servers.serving import serves


class ServiceArgs(ToolArgs):
    service: Name


SERVICE = register(Tool(
    "find_clinic_service", "knowledge", ServiceArgs, "Clinic Services",
    "Find when and where one of the clinic's services is open. Use when the clinician asks about "
    "a service's opening hours.",
    "When is the physiotherapy gym open?", idempotent=True,
))


@serves(knowledge.mcp, SERVICE)
def find_clinic_service(args: ServiceArgs) -> dict:
    """When and where one clinic service is open."""
    return {"service": args.service, "hours": "weekdays 07:30 to 15:00", "room": "B-114"}


# The agent loads only now, as it would after a catalogue that holds the record.
from appliance.agent.graph import Agent
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.base import deny_all
from appliance.tools.in_process import InProcessToolBox
from appliance.tools.scripted import ScriptedToolBox


async def listed():
    async with Client(knowledge.mcp) as client:
        return {t.name: t.input_schema for t in await client.list_tools()}

model = ScriptedModel({
    "INTENT_CLASSIFY": [{"intent": "TOOL_NEEDED", "task_summary": "The physiotherapy gym's hours.",
                         "suggested_tool": "find_clinic_service"}],
    "TOOL_SELECT": [{"tool_name": "find_clinic_service"}, {"service": "physiotherapy gym"}],
    "SYNTHESIZE": ["Per find_clinic_service, the physiotherapy gym is open weekdays 07:30 to 15:00 in room B-114."],
})
with InProcessToolBox() as real:
    tools = ScriptedToolBox({}, fallback=real, drug_names=[])
    result = Agent(model, tools, Settings(), deny_all).run_turn("When is the physiotherapy gym open?")
print(json.dumps({
    "prompts": {c.node: "\n".join(m.content for m in c.messages) for c in model.history if c.schema != "ServiceArgs"},
    "schemas": [c.schema for c in model.history],
    "calls": tools.calls,
    "tool_calls": result.tool_calls,
    "pending": model.pending(),
    "path": result.path,
    "response": result.response,
    "served": asyncio.run(listed())["find_clinic_service"],
    "model_schema": ServiceArgs.model_json_schema(),
}, default=str))
'''


def test_a_new_read_only_tool_is_one_record_and_its_server_function():
    proc = subprocess.run([sys.executable, "-c", SCENARIO], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    # Prompting: INTENT_CLASSIFY lists the tool with its example; TOOL_SELECT stage 1 with its
    # description, the argument list read off its model.
    assert '- find_clinic_service: "When is the physiotherapy gym open?"' in seen["prompts"]["INTENT_CLASSIFY"]
    assert ('- find_clinic_service(service) - Find when and where one of the clinic\'s services is open.'
            in seen["prompts"]["TOOL_SELECT"])
    # Selection: stage 1 may name it, stage 2 fills its own argument model; one good result of a
    # single-part request completes the turn (code labels it: no RESULT_CLASSIFY call).
    assert seen["schemas"] == ["IntentClassification", "ToolSelection", "ServiceArgs", None]
    assert seen["pending"] == {}
    assert seen["path"] == ["INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE", "RESULT_CLASSIFY",
                            "DETERMINISTIC_ROUTER", "SYNTHESIZE"]
    # Execution: the call reached the server function, and the result carries the record's label.
    assert seen["calls"] == [["find_clinic_service", {"service": "physiotherapy gym"}]]
    call = seen["tool_calls"][0]
    assert call["tool"] == "find_clinic_service" and call["label"] == "Clinic Services", call
    assert call["error_type"] is None and call["classification"] == "success_rich", call
    assert "[Clinic Services]\nservice: physiotherapy gym\nhours: weekdays 07:30 to 15:00" in seen["prompts"]["SYNTHESIZE"]
    # The answer names the label, never the tool.
    assert "find_clinic_service" not in seen["response"]
    assert "Clinic Services" in seen["response"] and "B-114" in seen["response"]
    # The server publishes the record's schema.
    expected = {k: v for k, v in seen["model_schema"].items() if k != "title"}
    expected["properties"] = {k: {kk: vv for kk, vv in v.items() if kk != "title"}
                              for k, v in expected["properties"].items()}
    assert seen["served"] == expected
