"""What code reads in a clinician's request before any model does: the patient a call is for,
and a prescription's drug, dose and frequency (docs/design.md §4.3, "code owns what code can
read").

Invariants:
- ``code_patient`` is the one patient the clinician's words and the turn settle on: the ID they
  typed in this message (exactly one), else the single match of a search this turn, else the
  patient open in the terminal (current in the line session) when the message names no other
  patient and holds no word shaped like a short ID ("pat-7"); otherwise None (code has no single
  answer and the model's pick is checked as before).
  A patient ID the model wrote that is not among the turn's grounded IDs never replaces it.
- ``prescription_from_words`` reads the prescribing clause of the message with the order parser
  (``appliance.medication.orders``) and returns ``prescribe_medication``'s arguments that code
  could read, each exactly the clinician's words (the drug as written, "500 mg", "three times
  daily"), so the write-grounding rule in ``tool_execute`` holds for them by construction. What
  the parser found nothing for is left out, for the model to fill and that rule to check.
- Only a request to write (``write_requests``) is read as an order: a question that mentions a
  drug and a dose ("is warfarin 10 mg safe for her?") never becomes one.
"""

from __future__ import annotations

import re

from appliance.agent.dictation import instruction_text
from appliance.agent.state import AgentState
from appliance.agent.write_requests import PRESCRIBE, PRESCRIBING_VERB, write_requests
from appliance.medication.names import DrugRecogniser
from appliance.medication.orders import Order, parse_order

# A word shaped like a record ID but too short to be recognised as one in text ("pat-7"): the
# clinician may have typed an ID, so the open patient is not code's answer (the model's pick is
# checked against what was typed instead).
_SHORT_ID_RE = re.compile(r"(?<![\w.\-])[A-Za-z]{2,10}-\d{1,2}(?:[.\-][A-Za-z0-9]+)*(?![\w])")


def code_patient(state: AgentState) -> str | None:
    """The patient the turn settles on by code's rules (see the module docstring), or None."""
    typed = tuple(dict.fromkeys(state.extracted_entities.patient_ids))
    if len(typed) == 1:
        return typed[0]
    if typed or _SHORT_ID_RE.search(instruction_text(state.user_query)):
        return None  # several typed, or maybe one code cannot read: the words decide per call
    for result in reversed(state.tool_results):
        found = result.result or {}
        if result.tool_name == "search_patient" and result.error_type is None and found.get("total_matches") == 1:
            return found["matches"][0].get("patient_id")
    if state.selected_patient_id and not state.extracted_entities.patient_names:
        return state.selected_patient_id
    return None


def prescribing_order(query: str, drugs: DrugRecogniser) -> Order | None:
    """The order in the message's prescribing clause, or None when the words ask for no
    prescription or name no drug there."""
    if PRESCRIBE not in write_requests(query):
        return None
    head = instruction_text(query)
    verbs = list(PRESCRIBING_VERB.finditer(head))
    start = verbs[0].start() if verbs else 0
    # ``instruction_text`` only replaces dictated text after the verb, so offsets before it agree.
    order = parse_order(query[start:], drugs)
    return order if order.drug_text else None


def prescription_from_words(state: AgentState, drugs: DrugRecogniser) -> tuple[dict, Order] | None:
    """(``prescribe_medication``'s arguments code read, the order) for this message, or None.
    The arguments hold ``patient_id`` only when ``code_patient`` has one; ``dosage`` and
    ``frequency`` only when the parser read them."""
    order = prescribing_order(state.user_query, drugs)
    if order is None:
        return None
    args: dict = {"medication_name": order.drug_text}
    patient = code_patient(state)
    if patient:
        args["patient_id"] = patient
    if order.dosage_text:
        args["dosage"] = order.dosage_text
    if order.frequency_text:
        args["frequency"] = order.frequency_text
    return args, order


__all__ = ["code_patient", "prescribing_order", "prescription_from_words"]
