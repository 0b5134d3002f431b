"""One enum of nodes and one dispatch table: the trace, the model calls, the scripts and the
dispatch all use ``Node``'s names, and what leaves the graph stays plain text."""

from __future__ import annotations

import json

from appliance.agent.graph import STEPS, Agent
from appliance.agent.state import NODE_LABELS, Node
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.tools.scripted import ScriptedToolBox

SEED_NAMES = ["INPUT_ASSEMBLY", "INTENT_CLASSIFY", "TOOL_SELECT", "TOOL_EXECUTE", "RESULT_CLASSIFY",
              "DETERMINISTIC_ROUTER", "ERROR_HANDLER", "SYNTHESIZE"]


def test_every_node_has_exactly_one_step_and_one_label():
    assert [n.value for n in Node] == SEED_NAMES
    assert list(STEPS) == list(Node) and list(NODE_LABELS) == list(Node)


def test_a_turn_speaks_node_names_everywhere_and_returns_plain_text():
    script = {  # the look-up, its label and its answer are code's; the retry's mode is the model's
        "ERROR_HANDLER": [{"strategy": "retry_same", "reasoning": "temporary"}],
    }
    tools = {"check_drug_safety": [{"error_type": "timeout", "message": "scripted"}, {"result": {"boxed_warning": "x"}}]}
    model = ScriptedModel(script)
    agent = Agent(model, ScriptedToolBox(tools, fallback=None, drug_names=["amiodarone"]), Settings())
    result = agent.run_turn("Check FDA warnings for amiodarone")
    assert model.pending() == {}
    assert {c.node for c in model.history} <= set(Node) and set(script) <= {c.node for c in model.history}
    out = result.to_json()
    names = out["path"] + [d["node"] for d in out["router"]] + [d["next"] for d in out["router"]] \
        + [t["node"] for t in out["timings"]] + [e["decision"] for e in out["trace"] if "decision" in e]
    assert names and all(type(name) is str for name in names)  # never the enum: traces are saved as text
    assert set(names) <= set(SEED_NAMES)
    assert json.loads(json.dumps(out)) == out
