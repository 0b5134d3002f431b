"""The patient code settles on for a turn, before any model does (docs/design.md §4.3, "code
owns what code can read").

Invariants:
- ``code_patient`` is the one patient the clinician's words and the turn settle on: the ID they
  typed in this message (exactly one), else the single match of a search this turn, else the
  patient open in the terminal (current in the line session) when the message names no other
  patient and holds no word shaped like a short ID ("pat-7"); otherwise None (code has no single
  answer and the model's pick is checked as before).
- A patient ID the model wrote that is not among the turn's grounded IDs never replaces it.
- The words are the turn's reading (``state.reading``); a state built without one (tests, the
  acceptance run's node measurements) has its short IDs read here.
"""

from __future__ import annotations

from appliance.agent.reading.dictation import instruction_text
from appliance.agent.reading.patient_refs import short_ids
from appliance.agent.state import AgentState


def code_patient(state: AgentState) -> str | None:
    """The patient the turn settles on by code's rules (see the module docstring), or None."""
    typed = tuple(dict.fromkeys(state.extracted_entities.patient_ids))
    if len(typed) == 1:
        return typed[0]
    # A word shaped like a record ID but too short to be recognised ("pat-7"): the clinician
    # may have typed an ID, so the open patient is not code's answer.
    short = state.reading.short_ids if state.reading is not None else short_ids(instruction_text(state.user_query))
    if typed or short:
        return None  # several typed, or maybe one code cannot read: the words decide per call
    for result in reversed(state.tool_results):
        found = result.result or {}
        if result.tool_name == "search_patient" and result.error_type is None and found.get("total_matches") == 1:
            return found["matches"][0].get("patient_id")
    if state.selected_patient_id and not state.extracted_entities.patient_names:
        return state.selected_patient_id
    return None


__all__ = ["code_patient"]
