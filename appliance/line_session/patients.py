"""The line session's current patient: who it is, how a turn changes it, and the /patient and
/find commands that confirm a chart before it becomes current (see appliance.line_session)."""

from __future__ import annotations

from dataclasses import dataclass, field

from appliance.agent.state import AgentState
from appliance.patient_choice import Outcome, Shown, search_and_pick
from common.patient_ids import is_patient_id
from mcp_servers.contracts import TOOL_SERVERS

_KEEP = object()  # a turn that says nothing about the current patient


@dataclass
class CurrentPatient:
    """The session's current patient, and the names seen for patient IDs this session."""

    patient_id: str | None = None
    names: dict[str, str] = field(default_factory=dict)

    def label(self, patient_id: str | None = None) -> str:
        pid = patient_id or self.patient_id
        if pid is None:
            return "no patient"
        name = self.names.get(pid)
        return f"{pid} ({name})" if name else pid

    def switch(self, patient_id: str | None) -> str | None:
        """Make ``patient_id`` current; the line announcing the change, None if none."""
        if patient_id == self.patient_id:
            return None
        before = self.patient_id and self.label()
        self.patient_id = patient_id
        if patient_id is None:
            return f"No current patient (was {before})."
        return f"Current patient: {self.label()}" + (f" (was {before})." if before else ".")

    def after_turn(self, state: AgentState) -> str | None:
        """Learn names from the turn's results and follow the patient it settled on."""
        for r in state.tool_results:
            if r.error_type is None and r.tool_name == "search_patient":
                self.names.update({m["patient_id"]: m["name"] for m in (r.result or {}).get("matches", [])
                                   if m.get("patient_id") and m.get("name")})
            if r.error_type is None and r.tool_name == "get_patient_chart":
                patient = (r.result or {}).get("patient") or {}
                if patient.get("patient_id") and patient.get("name"):
                    self.names[patient["patient_id"]] = patient["name"]
        chosen = turn_patient(state)
        return None if chosen is _KEEP else self.switch(chosen)


def turn_patient(state: AgentState):
    """The patient a turn settled on, None to clear, or ``_KEEP`` (see the module docstring)."""
    used = [r.args["patient_id"] for r in state.tool_results
            if r.error_type is None and TOOL_SERVERS.get(r.tool_name) == "ehr" and r.args.get("patient_id")]
    if used:
        return used[-1]
    searches = [r.result for r in state.tool_results
                if r.tool_name == "search_patient" and r.error_type is None and r.result]
    if searches and searches[-1].get("total_matches") == 1 and searches[-1].get("matches"):
        return searches[-1]["matches"][0]["patient_id"]
    if searches and searches[-1].get("total_matches", 0) > 1:
        return None
    said = state.extracted_entities.patient_ids
    refused = {r.args.get("patient_id") for r in state.tool_results if r.error_type in ("patient_not_found", "invalid_args")}
    if len(said) == 1 and said[0] not in refused:
        return said[0]
    return _KEEP


LOOKUP_SECONDS = 20.0


def find_patient(name: str, current: CurrentPatient, tools, shown: Shown | None = None) -> None:
    """``/find NAME``: one match becomes current; several are listed with birth dates and IDs and
    remembered (``shown``) so the clinician can pick one in words; a name with no exact match
    offers the closest names (``appliance.patient_choice``)."""
    if not name:
        print("Type /find and a name, e.g. /find Emily Johnson.")
        return
    open_choice(search_and_pick(name, None, shown if shown is not None else Shown(), searcher(tools)), current, tools)


def searcher(tools):
    """The record's patient search, as ``appliance.patient_choice`` calls it."""
    return lambda name: tools.call("search_patient", {"name": name}, LOOKUP_SECONDS)


def open_choice(outcome: Outcome, current: CurrentPatient, tools) -> None:
    """Print what choosing a patient found, and make the chosen one current (chart confirmed)."""
    for text in outcome.lines:
        print(text)
    if outcome.opened is not None:
        current.names[outcome.opened.patient_id] = outcome.opened.name
        set_patient(current, outcome.opened.patient_id, tools)


def set_patient(current: CurrentPatient, patient_id: str | None, tools=None) -> None:
    """``/patient ID``: the chart's identity and allergies confirm the right patient before it
    becomes current; an ID the record does not hold is said and changes nothing."""
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
                current.names[patient_id] = name
        else:
            confirm = ["(the chart could not be read to confirm who this is: check the name before you act)"]
    unchanged = f"Current patient: {current.label()}." if current.patient_id else "No current patient."
    print(current.switch(patient_id) or unchanged)
    for text in confirm or []:
        print(f"  {text}")


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
