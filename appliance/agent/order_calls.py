"""The calls code makes for a medication order the clinician's words give (TOOL_SELECT's
``_code_call``): a new prescription, a change of an order on the chart, or a question.

Invariants:
- The order is the turn's reading's (``reading.orders`` read it once); a state built without a
  reading (tests, the acceptance run's node measurements) has its words read by ``reading_of``.
- ``prescription_from_words`` gives ``prescribe_medication``'s arguments from the order, each
  exactly the clinician's words, so the write-grounding rule holds for them by construction;
  what the parser found nothing for is left out, for the model to fill and that rule to check.
  ``change_from_words`` does the same for a change of an order on the chart. The patient is
  ``settled_patient.code_patient``'s, when code has one. ``order_notes``: what the frequency
  sent does not hold goes to the notes.
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
from appliance.agent.reading.orders import dosage_arg, record_frequency
from appliance.agent.reading.request import reading_of
from appliance.agent.reading.write_requests import CHANGE, PRESCRIBE, STATUS
from appliance.agent.settled_patient import code_patient
from appliance.agent.state import AgentState
from appliance.medication.changes import OrderChange
from appliance.medication.names import DrugRecogniser
from appliance.medication.order_words import AS_NEEDED_RE
from appliance.medication.orders import Order


def prescription_from_words(state: AgentState, drugs: DrugRecogniser) -> tuple[dict, Order] | None:
    """(``prescribe_medication``'s arguments code read, the order) for this message, or None.
    The arguments hold ``patient_id`` only when ``code_patient`` has one; ``dosage`` and
    ``frequency`` only when the parser read them."""
    order = reading_of(state, drugs).order
    if order is None:
        return None
    args: dict = {"medication_name": order.drug_text}
    patient = code_patient(state)
    if patient:
        args["patient_id"] = patient
    if dosage_arg(order):
        args["dosage"] = dosage_arg(order)
    if record_frequency(order):
        args["frequency"] = record_frequency(order)
    return args, order


def order_notes(order: Order, frequency: str | None) -> str | None:
    """What the frequency sent does not hold: route, what for and the maximum, duration,
    quantity and refills, as written."""
    sent = frequency or ""
    parts = [order.route_text,
             f"as needed for {order.as_needed_for}" if order.as_needed_for and order.as_needed_for not in sent
             else ("as needed" if order.as_needed and not AS_NEEDED_RE.search(sent) else None),
             order.max_per_day.text if order.max_per_day and order.max_per_day.text not in sent else None,
             order.duration_text, order.quantity.text if order.quantity else None,
             f"{order.refills} refills" if order.refills is not None else None]
    return "; ".join(p for p in parts if p) or None


def change_from_words(state: AgentState, drugs: DrugRecogniser) -> tuple[str, dict, OrderChange] | None:
    """(tool, arguments code read, the change) for a change of an order on the chart, or None
    when the words ask for none or name no drug. ``patient_id`` only when ``code_patient``
    has one; a change's ``dosage`` and ``frequency`` None when not given (the order keeps its
    own)."""
    read = reading_of(state, drugs).change
    if read is None:
        return None
    tool, args, change = read
    patient = code_patient(state)
    return tool, ({**args, "patient_id": patient} if patient else dict(args)), change


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


__all__ = ["ORDER_TOOLS", "change_from_words", "order_call", "order_notes", "prescription_from_words"]
