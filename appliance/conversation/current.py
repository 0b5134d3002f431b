"""The conversation's current patient: who it is, the names seen for patient IDs, and the
patient a turn settled on (both front ends follow it through ``Conversation.follow_turn``).

Invariants:
- A turn settles on the patient of its last successful record call, else its one unique search
  match, else the one patient ID in the clinician's words that no call refused; a search with
  several matches clears it; anything else keeps it (``KEEP``).
- Changing the patient here never starts a new conversation: only ``Conversation.open_patient``
  applies that rule (``appliance.conversation.rule``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from appliance.agent.state import AgentState
from mcp_servers.contracts import TOOL_SERVERS

KEEP = object()  # a turn that says nothing about the current patient


@dataclass
class CurrentPatient:
    """The current patient, and the names seen for patient IDs in this session."""

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

    def learn_names(self, state: AgentState) -> None:
        """Names from the turn's successful searches and chart reads."""
        for r in state.tool_results:
            if r.error_type is None and r.tool_name == "search_patient":
                self.names.update({m["patient_id"]: m["name"] for m in (r.result or {}).get("matches", [])
                                   if m.get("patient_id") and m.get("name")})
            if r.error_type is None and r.tool_name == "get_patient_chart":
                patient = (r.result or {}).get("patient") or {}
                if patient.get("patient_id") and patient.get("name"):
                    self.names[patient["patient_id"]] = patient["name"]

    def after_turn(self, state: AgentState) -> str | None:
        """Learn names from the turn's results and follow the patient it settled on."""
        self.learn_names(state)
        chosen = turn_patient(state)
        return None if chosen is KEEP else self.switch(chosen)


def turn_patient(state: AgentState):
    """The patient a turn settled on, None to clear, or ``KEEP`` (see the module docstring)."""
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
    return KEEP
