"""Node 2, INTENT_CLASSIFY (LLM, T=0.0): DIRECT or TOOL_NEEDED plus a clinical framing.

It does not choose the tool (TOOL_SELECT does), plan steps, or extract arguments (docs/design.md §4.2).
"""

from __future__ import annotations

from appliance.agent.knowledge_requests import routed_by_code
from appliance.agent.knowledge_requests import summary as knowledge_summary
from appliance.agent.nodes.prompting import PROMPT_TOOLS, TOOL_EXAMPLES, conversation
from appliance.agent.reading.chart_topics import ORDER
from appliance.agent.reading.request import reading_of
from appliance.agent.schemas import IntentClassification
from appliance.agent.settled_patient import code_patient
from appliance.agent.state import AgentState, Node, NodeResult
from appliance.llm.base import LanguageModel
from appliance.llm.grammar import token_budget

SCHEMA = IntentClassification
TEMPERATURE = 0.0
MAX_TOKENS = token_budget(SCHEMA, 256)

# Every tool, in name order, with one example request each: no tool is first or alone by design.
_TOOL_LINES = "\n".join(f'- {name}: "{TOOL_EXAMPLES[name]}"' for name in PROMPT_TOOLS)

SYSTEM_PROMPT = f"""You are a clinical decision-support assistant connected to the clinic's health record and to local medical knowledge sources.

Classify the clinician's message and summarise the task.

- DIRECT: greetings, thanks, and general medical questions that medical knowledge alone answers (for example "What is hypertension?", "Hello", "How does metformin work?").
- TOOL_NEEDED: anything that needs a specific patient's record, a drug safety or interaction lookup, a literature or clinical trial search, a prescription, an allergy entry, a clinical note, or analysis of an attached image.

Write task_summary as one short clinical sentence (under 40 words). If TOOL_NEEDED, set suggested_tool to the tool that fits the request best, otherwise null.
Tools, each with an example request:
{_TOOL_LINES}
Answer with JSON only."""


def run(state: AgentState, model: LanguageModel) -> NodeResult:
    """The intent; next SYNTHESIZE for DIRECT, TOOL_SELECT otherwise."""
    if routed_by_code(state):
        # Code read every step the words name (knowledge_requests): no model call for the intent.
        calls = state.knowledge_calls
        update = {"intent": "TOOL_NEEDED", "task_summary": knowledge_summary(calls), "suggested_tool": calls[0].tool}
        return _labelled(update, {**update, "by": "code", "reason": "the clinician's words name the look-up"}, False)
    if chart_routed_by_code(state):
        # A question about the chart of the patient code settled on: code makes the chart call, no model call.
        topics = reading_of(state).chart_topics
        asked = "the patient's chart" if topics == ORDER else "the patient's " + ", ".join(topics)
        update = {"intent": "TOOL_NEEDED", "task_summary": f"The clinician asks about {asked}.",
                  "suggested_tool": "get_patient_chart"}
        return _labelled(update, {**update, "by": "code", "reason": "the clinician asked about the patient's chart"},
                         False)
    user = state.user_query
    if state.selected_patient_id:
        user += f"\n(The clinician has patient {state.selected_patient_id} open.)"
    if state.extracted_entities.has_image:
        user += "\n(An image is attached.)"
    out = model.generate_constrained(
        Node.INTENT_CLASSIFY,
        conversation(SYSTEM_PROMPT, user, state.conversation_history),
        SCHEMA,
        temperature=TEMPERATURE,
        max_tokens=MAX_TOKENS,
    )
    update = {"intent": out.intent, "task_summary": out.task_summary, "suggested_tool": out.suggested_tool}
    output = out.model_dump()
    reading = reading_of(state)
    requested = reading.writes
    if out.intent == "DIRECT" and requested:
        # Code overrules the model: a request to change the record is never answered with prose alone.
        update.update(intent="TOOL_NEEDED", suggested_tool=requested[0])
        output["overruled"] = f"the clinician asked to change the record ({requested[0]}): TOOL_NEEDED"
    elif out.intent == "DIRECT" and reading.chart_topics and (
            state.selected_patient_id or state.extracted_entities.patient_ids):
        # Code overrules the model: a question about this patient's chart is answered from the chart.
        update.update(intent="TOOL_NEEDED", suggested_tool="get_patient_chart")
        output["overruled"] = "the clinician asked about the patient's chart: TOOL_NEEDED"
    elif out.intent == "DIRECT" and state.knowledge_calls:
        # Code overrules the model: a look-up code can name is never answered with prose alone.
        update.update(intent="TOOL_NEEDED", suggested_tool=state.knowledge_calls[0].tool)
        output["overruled"] = f"the clinician's words name a look-up ({state.knowledge_calls[0].tool}): TOOL_NEEDED"
    elif requested and out.suggested_tool != requested[0]:
        # The label follows the request code read: a prescription is never "Allergy Documentation".
        update["suggested_tool"] = requested[0]
        output["overruled"] = f"the clinician asked to change the record ({requested[0]})"
    if (update["intent"], update["suggested_tool"]) != (out.intent, out.suggested_tool):
        # The trace shows the route taken; what the model said stays in the details.
        output["model_said"] = {"intent": out.intent, "suggested_tool": out.suggested_tool}
        output.update(intent=update["intent"], suggested_tool=update["suggested_tool"])
    return _labelled(update, output, True)


def chart_routed_by_code(state: AgentState) -> bool:
    """A question about chart sections (the reading's chart topics) whose only step is the
    chart, of a patient code settled on (typed, or open with no other named) or of the one
    patient the words name (searched first, by code): code routes it."""
    reading, entities = reading_of(state), state.extracted_entities
    named = len(entities.patient_names) == 1 and not entities.patient_ids
    return bool(reading.chart_topics) and not reading.writes and not state.knowledge_calls \
        and ({s.tool for s in reading.steps} <= {"get_patient_chart"} and code_patient(state) is not None
             or {s.tool for s in reading.steps} <= {"get_patient_chart", "search_patient"} and named)


def _labelled(update: dict, output: dict, model_call: bool) -> NodeResult:
    nxt = Node.SYNTHESIZE if update["intent"] == "DIRECT" else Node.TOOL_SELECT
    return NodeResult(update, output, nxt, model_call=model_call)
