"""The orders in a clinician's words, read once with the request (docs/design.md §4.3, "code
owns what code can read"): a prescription's drug, dose and frequency, a change of an order on
the chart, and the misspelt drug an order names.

Invariants:
- Only a request to write (``write_requests``) is read as an order: a question that mentions a
  drug and a dose ("is warfarin 10 mg safe for her?") never becomes one.
- ``read_prescribing_order`` reads the prescribing clause with the order parser
  (``appliance.medication.orders``); the values sent are exactly the clinician's words (the drug
  as written, "500 mg", "three times daily"), so the write-grounding rule holds for them by
  construction. A dose written without a unit is sent with the drug's usual unit ("875" ->
  "875 mg", ``order_words.implied_unit``), for the clinician to see and confirm.
- The frequency code sends is the clinician's words from the frequency through "PRN", what for
  and the maximum when they are written together ("q4-6h PRN pain, max 4 g/day"), the longest
  such run the record accepts, so an as-needed order is charted as needed.
- ``read_order_change`` reads a change of an order on the chart (``medication.changes``): the
  drug as the recogniser names it (the chart's generic), the new dose or frequency, the action
  and the reason, each the clinician's words; never the patient (``settled_patient.code_patient``'s).
"""

from __future__ import annotations

import re

from appliance.agent.reading.dictation import instruction_text
from appliance.agent.reading.words import name_words
from appliance.agent.reading.write_requests import (
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


def prescribing_order(query: str, drugs: DrugRecogniser) -> Order | None:
    """The order in the message's prescribing clause, or None when the words ask for no
    prescription or name no drug there."""
    return read_prescribing_order(query, instruction_text(query), write_requests(query), drugs)


def read_prescribing_order(query: str, head: str, writes: tuple[str, ...], drugs: DrugRecogniser) -> Order | None:
    """The parse behind ``prescribing_order``: ``head`` is the instruction, ``writes`` the
    message's write requests."""
    if PRESCRIBE not in writes:
        return None
    verbs = list(PRESCRIBING_VERB.finditer(head))
    start = verbs[0].start() if verbs else 0
    # ``instruction_text`` only replaces dictated text after the verb, so offsets before it agree.
    order = parse_order(query[start:], drugs)
    return order if order.drug_text else None


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


def read_order_change(head: str, writes: tuple[str, ...], drugs: DrugRecogniser) -> tuple[str, dict, OrderChange] | None:
    """The parse behind ``change_from_words``: (tool, arguments without the patient, the change)."""
    tool = next((t for t in writes if t in (CHANGE, STATUS)), None)
    if tool is None:
        return None
    for clause in clauses(head):
        if change_verb(clause) is None:
            continue
        change = read_change(clause, drugs)
        if change is None:
            continue
        args: dict = {"medication_name": change.generic or change.drug_text}
        if tool == CHANGE:
            new = change.new_order  # a switch: the new drug's own values (never the old order's)
            order = new or change.order
            frequency = record_frequency(order) if order.frequency_text or order.as_needed else None
            args.update(new_medication_name=new.drug_text if new else None,
                        dosage=dosage_arg(order), frequency=frequency, reason=change.reason)
            if new is not None and not (args["dosage"] and frequency):
                args.update(dosage=None, frequency=None)  # asked for whole, before any approval
        else:
            args.update(action=change.action, reason=change.reason)
        return tool, args, change
    return None


def misspelt_drug(query: str, drugs: DrugRecogniser) -> tuple[str, str] | None:
    """(the word as written, the drug it is likely meant to be) when an order or a change names
    no drug the recogniser knows but a word close to one ("amoxicilin"), else None."""
    return read_misspelt_drug(instruction_text(query), write_requests(query), drugs)


def read_misspelt_drug(head: str, writes: tuple[str, ...], drugs: DrugRecogniser) -> tuple[str, str] | None:
    """The parse behind ``misspelt_drug``: ``head`` is the instruction, ``writes`` its write requests."""
    if not writes or drugs.find(head):
        return None
    for word in name_words(head, 4):
        close = suggestion(word, drugs)
        if close:
            return word, close
    return None
