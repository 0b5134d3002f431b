"""The line session's /patient and /find commands and a patient chosen in words: each confirms
the chart before the conversation core (``appliance.conversation``) opens the patient, and says
when that starts a new conversation."""

from __future__ import annotations

from appliance.conversation import Conversation
from appliance.conversation.patient_choice import Outcome, search_and_pick
from common.patient_ids import is_patient_id

LOOKUP_SECONDS = 20.0
NEW_CONVERSATION = ("A new conversation starts for {}; the previous one is saved "
                    "(`appliance session --session ID` or the terminal's Ctrl+R reopen it).")


def find_patient(name: str, conversation: Conversation, tools) -> None:
    """``/find NAME``: one match is opened; several are listed with birth dates and IDs and
    remembered (the conversation's ``shown``) so the clinician can pick one in words; a name with
    no exact match offers the closest names (``appliance.conversation.patient_choice``)."""
    if not name:
        print("Type /find and a name, e.g. /find Emily Johnson.")
        return
    open_choice(search_and_pick(name, None, conversation.shown, searcher(tools)), conversation, tools)


def searcher(tools):
    """The record's patient search, as ``appliance.conversation.patient_choice`` calls it."""
    return lambda name: tools.call("search_patient", {"name": name}, LOOKUP_SECONDS)


def open_choice(outcome: Outcome, conversation: Conversation, tools) -> None:
    """Print what choosing a patient found, and open the chosen one (chart confirmed)."""
    for text in outcome.lines:
        print(text)
    if outcome.opened is not None:
        conversation.current.names[outcome.opened.patient_id] = outcome.opened.name
        set_patient(conversation, outcome.opened.patient_id, tools)


def set_patient(conversation: Conversation, patient_id: str | None, tools=None, *, opening: bool = True) -> None:
    """``/patient ID``: the chart's identity and allergies confirm the right patient before the
    conversation opens it (which may start a new conversation, said here); an ID the record does
    not hold is said and changes nothing. ``opening`` False only confirms the patient a resumed
    conversation already has current."""
    if patient_id is not None and not is_patient_id(patient_id):
        print(f"'{patient_id}' is not a patient ID (letters, digits, '-' and '.', up to 64 characters).")
        return
    confirm = None
    if patient_id is not None and tools is not None:
        outcome = tools.call("get_patient_chart", {"patient_id": patient_id}, LOOKUP_SECONDS)
        if not outcome.ok and outcome.error_type == "patient_not_found":
            print(f"The record holds no patient {patient_id}; the current patient is unchanged.")
            return
        if outcome.ok and isinstance(outcome.result, dict):
            confirm = identity_lines(outcome.result)
            name = (outcome.result.get("patient") or {}).get("name")
            if name:
                conversation.current.names[patient_id] = name
        else:
            confirm = ["(the chart could not be read to confirm who this is: check the name before you act)"]
    opened = conversation.open_patient(patient_id) if opening else None
    current = conversation.current
    unchanged = f"Current patient: {current.label()}." if current.patient_id else "No current patient."
    print((opened and opened.announced) or unchanged)
    for text in confirm or []:
        print(f"  {text}")
    if opened is not None and opened.new_conversation:
        print(NEW_CONVERSATION.format(current.label()))


def identity_lines(chart: dict) -> list[str]:
    """Who the chart is (name, birth date, sex) and their allergies, as the banner shows them."""
    p = chart.get("patient") or {}
    who = ", ".join(str(v) for v in (p.get("name"), f"born {p['birth_date']}" if p.get("birth_date") else None,
                                     p.get("sex")) if v)
    allergies = chart.get("allergies")
    if not isinstance(allergies, list):
        said = "Allergies: not read"
    elif not allergies:
        said = "Allergies: none recorded"
    else:
        said = "Allergies: " + "; ".join(
            f"{a.get('substance')}" + (f" ({a.get('reaction')}; {a.get('severity')})" if a.get("reaction") else "")
            for a in allergies)
    return [who, said]
