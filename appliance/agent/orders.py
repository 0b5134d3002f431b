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
- The frequency code sends is the clinician's words from the frequency through "PRN", what for
  and the maximum when they are written together ("q4-6h PRN pain, max 4 g/day"), the longest
  such run the record accepts, so an as-needed order is charted as needed; what does not fit
  goes to the notes. A dose written without a unit is sent with the drug's usual unit
  ("875" -> "875 mg", ``order_words.implied_unit``), for the clinician to see and confirm.
- ``change_from_words`` reads a change of an order on the chart (``medication.changes``): the
  drug as the recogniser names it (the chart's generic), the new dose or frequency, the action
  and the reason, each the clinician's words.
"""

from __future__ import annotations

import re

from appliance.agent.dictation import instruction_text
from appliance.agent.state import AgentState
from appliance.agent.write_requests import (
    CHANGE,
    PRESCRIBE,
    PRESCRIBING_VERB,
    STATUS,
    clauses,
    write_requests,
)
from appliance.medication.changes import OrderChange, change_verb, read_change
from appliance.medication.names import DrugRecogniser
from appliance.medication.order_words import AS_NEEDED_RE
from appliance.medication.orders import Order, parse_order
from appliance.medication.spelling import suggestion
from ehr_db.errors import InvalidField
from ehr_db.validation import frequency as record_accepts_frequency

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
    if dosage_arg(order):
        args["dosage"] = dosage_arg(order)
    if record_frequency(order):
        args["frequency"] = record_frequency(order)
    return args, order


_UNIT_WORDS = {"unit": "units"}


def dosage_arg(order: Order) -> str | None:
    """The dosage as the clinician wrote it; a bare number with the drug's usual unit."""
    if order.dose is not None and order.dose.implied and order.strength is None:
        return f"{order.dose.text} {_UNIT_WORDS.get(order.dose.unit, order.dose.unit)}"
    return order.dosage_text


def _accepted(text: str) -> bool:
    try:
        record_accepts_frequency(text)
    except InvalidField:
        return False
    return True


def record_frequency(order: Order) -> str | None:
    """The frequency to send (see the module docstring), or None when none was read."""
    text = order.text
    after = order.dose.span[1] if order.dose is not None else 0
    pieces: list[tuple[int, int]] = []
    if order.frequency_text:
        at = text.find(order.frequency_text, after)
        at = at if at >= 0 else text.find(order.frequency_text)
        pieces.append((at, at + len(order.frequency_text)))
    prn = AS_NEEDED_RE.search(text, after) if order.as_needed else None
    if prn:
        pieces.append(prn.span())
        if order.as_needed_for:
            at = text.find(order.as_needed_for, prn.end())
            if at >= 0:
                pieces.append((at, at + len(order.as_needed_for)))
    if order.max_per_day is not None:
        pieces.append(order.max_per_day.span)
    pieces.sort()
    runs = [pieces[:n] for n in range(len(pieces), 0, -1)]
    for run in runs:
        if all(re.fullmatch(r"[\s,;]*(?:for\s+)?", text[a[1]:b[0]], re.IGNORECASE) for a, b in zip(run, run[1:])):
            candidate = text[run[0][0]:run[-1][1]].strip(" ,;")
            if len(candidate) <= 40 and _accepted(candidate):
                return candidate
    return order.frequency_text


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
    wanted = write_requests(state.user_query)
    tool = next((t for t in wanted if t in (CHANGE, STATUS)), None)
    if tool is None:
        return None
    head = instruction_text(state.user_query)
    for clause in clauses(head):
        if change_verb(clause) is None:
            continue
        change = read_change(clause, drugs)
        if change is None:
            continue
        args: dict = {"medication_name": change.generic or change.drug_text}
        patient = code_patient(state)
        if patient:
            args["patient_id"] = patient
        if tool == CHANGE:
            frequency = record_frequency(change.order) if change.order.frequency_text or change.order.as_needed else None
            args.update(dosage=dosage_arg(change.order), frequency=frequency, reason=change.reason)
        else:
            args.update(action=change.action, reason=change.reason)
        return tool, args, change
    return None


def misspelt_drug(query: str, drugs: DrugRecogniser) -> tuple[str, str] | None:
    """(the word as written, the drug it is likely meant to be) when an order or a change names
    no drug the recogniser knows but a word close to one ("amoxicilin"), else None."""
    head = instruction_text(query)
    if not write_requests(query) or drugs.find(head):
        return None
    for word in re.findall(r"[A-Za-z][A-Za-z\-]{3,}", head):
        close = suggestion(word, drugs)
        if close:
            return word, close
    return None


__all__ = ["change_from_words", "code_patient", "dosage_arg", "misspelt_drug", "order_notes", "prescribing_order",
           "prescription_from_words", "record_frequency"]
