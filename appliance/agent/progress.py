"""How far the turn has got with what the request names (docs/design.md §9, §11): the steps
still to do and whether the task is complete, as pure functions of the state. The router,
TOOL_SELECT, the error handler and SYNTHESIZE all ask the same questions here.

Invariants:
- Pure functions of the state and limits; no model call, no I/O.
- The model never judges sufficiency: completion is step cap, duplicate call, or task
  patterns (the steps the clinician's instruction names -> tools that must have run; the
  turn's reading's ``steps``), else one good tool is enough. Dictated text names no step.
- A tool that was skipped by the error handler counts as handled, so a skip continues the
  task instead of selecting the same tool again.
- A patient ID already known (typed in the query, or the patient open in the terminal or
  current in the line session when the query names no patient) removes search_patient from
  what a pattern requires.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.agent.knowledge_requests import (
    KNOWLEDGE_TOOLS,
    STEP_OF_TOOL,
    calls_not_done,
    chart_only_implied,
)
from appliance.agent.reading.request import reading_of
from appliance.agent.reading.task_patterns import SEARCH, Step
from appliance.agent.state import AgentState


@dataclass(frozen=True)
class Limits:
    max_steps: int = 4
    max_retries: int = 2
    max_total_retries: int = 4


def patient_id_known(state: AgentState) -> bool:
    """An ID in the clinician's words, or the open (current) patient unless the words name a
    patient: "patient Maria Garcia" with John Smith open still needs a search."""
    e = state.extracted_entities
    return bool(e.patient_ids or (state.selected_patient_id and not e.patient_names))


def required_tools(state: AgentState) -> set[str]:
    steps = reading_of(state).steps
    needed = {step.tool for step in steps}
    if state.knowledge_calls:  # code read the look-ups: its calls stand for the knowledge steps
        needed = (needed - KNOWLEDGE_TOOLS) | {c.tool for c in state.knowledge_calls}
        if chart_only_implied(state):
            needed.discard("get_patient_chart")
    if state.extracted_entities.patient_names and not patient_id_known(state):
        needed.add("search_patient")
    # "Find John Smith ..." names a patient as surely as "patient John Smith": only a typed ID
    # stands in for that search, not the patient who happens to be open.
    searched_by_name = SEARCH in steps and not state.extracted_entities.patient_ids
    if patient_id_known(state) and not searched_by_name:
        needed.discard("search_patient")
    return needed


def handled_tools(state: AgentState) -> set[str]:
    done = {r.tool_name for r in state.tool_results if r.error_type is None}
    return done | set(state.skipped_tools)


def steps_not_done(state: AgentState) -> tuple[Step, ...]:
    """The steps the request names that neither ran nor were skipped, in the order named."""
    missing = required_tools(state) - handled_tools(state) | {c.tool for c in calls_not_done(state)}
    steps = [SEARCH] if "search_patient" in missing else []
    steps += [s for s in reading_of(state).steps if s.tool in missing and s.tool != "search_patient"]
    steps += [STEP_OF_TOOL[t] for t in dict.fromkeys(c.tool for c in state.knowledge_calls)
              if t in missing and STEP_OF_TOOL[t] not in steps]
    return tuple(steps)


def is_duplicate_call(state: AgentState) -> bool:
    """The last call repeats an earlier successful call (same tool, same arguments)."""
    if len(state.tool_results) < 2:
        return False
    last = state.tool_results[-1].signature()
    return any(r.signature() == last and r.error_type is None for r in state.tool_results[:-1])


def task_status(state: AgentState, limits: Limits) -> tuple[bool, str]:
    """(complete, reason) from the deterministic termination rules."""
    if state.step_count >= limits.max_steps:
        return True, f"step limit reached ({state.step_count}/{limits.max_steps})"
    if is_duplicate_call(state):
        return True, "the same call was repeated; stopping the loop"
    needed = required_tools(state)
    missing = needed - handled_tools(state) | {c.tool for c in calls_not_done(state)}
    if needed:
        if missing:
            return False, "the request still needs: " + ", ".join(sorted(missing))
        return True, "every part of the request has been looked up"
    if handled_tools(state):
        return True, "one result answers a single-part request"
    return False, "no usable result yet"
