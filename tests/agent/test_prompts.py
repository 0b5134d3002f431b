"""The prompts that list tools single none out (docs/design.md §8): every tool, in name order,
each with its own example; TOOL_SELECT shows no default example."""

from __future__ import annotations

import pytest

from appliance.agent.nodes import intent_classify, tool_select
from appliance.agent.nodes.prompting import PROMPT_TOOLS, TOOL_EXAMPLES
from appliance.agent.state import AgentState
from appliance.llm.fake import ScriptedModel
from mcp_servers.contracts import ARG_SCHEMAS


def test_every_tool_has_one_example_and_the_order_is_by_name():
    assert set(TOOL_EXAMPLES) == set(ARG_SCHEMAS)
    assert list(PROMPT_TOOLS) == sorted(ARG_SCHEMAS)
    assert len(set(TOOL_EXAMPLES.values())) == len(TOOL_EXAMPLES)


@pytest.mark.parametrize("prompt", [intent_classify.SYSTEM_PROMPT, tool_select.STAGE1_PROMPT], ids=["intent", "stage1"])
def test_prompts_list_every_tool_with_its_example_in_name_order(prompt):
    lines = [line for line in prompt.splitlines() if line.startswith("- ")]
    tool_lines = [line for line in lines if any(line.startswith(f"- {t}") for t in PROMPT_TOOLS)]
    assert [next(t for t in PROMPT_TOOLS if line.startswith(f"- {t}")) for line in tool_lines] == list(PROMPT_TOOLS)
    for tool, line in zip(PROMPT_TOOLS, tool_lines):
        assert f'"{TOOL_EXAMPLES[tool]}"' in line
    assert prompt.rstrip().endswith("Answer with JSON only.")


def _stage1_user_message(suggested: str | None) -> str:
    model = ScriptedModel({"TOOL_SELECT": [{"tool_name": "search_patient"}, {"name": "Ana Lopez"}]})
    st = AgentState(user_query="Find the patient Ana Lopez", intent="TOOL_NEEDED", suggested_tool=suggested, task_summary="Find a patient.")
    tool_select.run(st, model)
    return model.history[0].messages[-1].content


def test_stage1_shows_the_suggested_tools_example_and_no_default():
    assert "Example:" not in _stage1_user_message(None)
    with_hint = _stage1_user_message("find_clinical_trials")
    assert f'"{TOOL_EXAMPLES["find_clinical_trials"]}"' in with_hint
    assert TOOL_EXAMPLES["check_drug_safety"] not in with_hint
