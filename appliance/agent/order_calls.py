"""The calls code makes for a medication order the clinician's words give (TOOL_SELECT's
``_code_call``): a new prescription, a change of an order on the chart, or a question.

Invariants:
- An order whose drug, dose and frequency code reads is called by code, with or without a
  patient: with none, the call's missing patient is the question "which patient?" (TOOL_EXECUTE
  and the error handler), never a model's guess and never a validation error shown as text.
- A change (new dose or frequency; stop, hold, resume, renew) whose drug code reads is called
  by code; its missing values stay null (the order keeps its own).
- A drug code does not know but a word close to one ("amoxicilin") is sent as written, so the
  recogniser's check refuses it and the clinician is asked "did you mean amoxicillin?"
  (``error_handler``), rather than the model guessing or the request being refused.
"""

from __future__ import annotations

from appliance.agent.order_gate import ORDER_TOOLS
from appliance.agent.orders import (
    change_from_words,
    code_patient,
    order_notes,
    prescription_from_words,
)
from appliance.agent.reading.request import reading_of
from appliance.agent.reading.write_requests import CHANGE, PRESCRIBE, STATUS
from appliance.agent.state import AgentState
from appliance.medication.names import DrugRecogniser


def order_call(state: AgentState, tool: str, drugs: DrugRecogniser) -> tuple[str, dict, bool, str] | None:
    """(tool, arguments, complete, why) for the next order step ``tool``, or None: the model
    chooses."""
    if tool in (CHANGE, STATUS):
        read = change_from_words(state, drugs)
        if read is not None:
            return read[0], read[1], True, "the clinician's words give the change"
    elif tool == PRESCRIBE:
        read = prescription_from_words(state, drugs)
        if read is not None:
            args, order = read
            args["notes"] = order_notes(order, args.get("frequency"))
            complete = all(args.get(k) for k in ("medication_name", "dosage", "frequency"))
            return PRESCRIBE, args, complete, "the clinician's words give the order in full"
    typo = reading_of(state, drugs).misspelt_drug
    if typo is None:
        return None
    args = {"medication_name": typo[0]}
    patient = code_patient(state)
    if patient:
        args["patient_id"] = patient
    return tool, args, True, "the drug's name is not one code knows: the clinician is asked"


__all__ = ["ORDER_TOOLS", "order_call"]
