"""What code settles from the turn's reading before any model does: the patient a call is for,
and the arguments of the order the clinician's words give (docs/design.md §4.3, "code owns
what code can read"). The words themselves are read once, in ``reading`` (``reading.orders``).

Invariants:
- ``code_patient`` is the one patient the clinician's words and the turn settle on: the ID they
  typed in this message (exactly one), else the single match of a search this turn, else the
  patient open in the terminal (current in the line session) when the message names no other
  patient and holds no word shaped like a short ID ("pat-7"); otherwise None (code has no single
  answer and the model's pick is checked as before).
  A patient ID the model wrote that is not among the turn's grounded IDs never replaces it.
- ``prescription_from_words`` gives ``prescribe_medication``'s arguments from the reading's
  order, each exactly the clinician's words, so the write-grounding rule holds for them by
  construction; what the parser found nothing for is left out, for the model to fill and that
  rule to check. ``change_from_words`` does the same for a change of an order on the chart.
- ``order_notes``: what the frequency sent does not hold goes to the notes.
- A state built without a reading (tests, the acceptance run) has its words read here.
"""

from __future__ import annotations

from appliance.agent.reading.dictation import instruction_text
from appliance.agent.reading.orders import (
    dosage_arg,
    prescribing_order,
    read_order_change,
    record_frequency,
)
from appliance.agent.reading.patient_refs import short_ids
from appliance.agent.reading.write_requests import write_requests
from appliance.agent.state import AgentState
from appliance.medication.changes import OrderChange
from appliance.medication.names import DrugRecogniser
from appliance.medication.order_words import AS_NEEDED_RE
from appliance.medication.orders import Order


def code_patient(state: AgentState) -> str | None:
    """The patient the turn settles on by code's rules (see the module docstring), or None.
    Reads the turn's reading (``state.reading``); a state built without one (tests, the
    acceptance run) has its words read here."""
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


def prescription_from_words(state: AgentState, drugs: DrugRecogniser) -> tuple[dict, Order] | None:
    """(``prescribe_medication``'s arguments code read, the order) for this message, or None.
    The arguments hold ``patient_id`` only when ``code_patient`` has one; ``dosage`` and
    ``frequency`` only when the parser read them."""
    order = state.reading.order if state.reading is not None else prescribing_order(state.user_query, drugs)
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
    if state.reading is not None:
        read = state.reading.change
    else:
        read = read_order_change(instruction_text(state.user_query), write_requests(state.user_query), drugs)
    if read is None:
        return None
    tool, args, change = read
    patient = code_patient(state)
    return tool, ({**args, "patient_id": patient} if patient else dict(args)), change


__all__ = ["change_from_words", "code_patient", "order_notes", "prescription_from_words"]
