"""The interactive headless session: a line-based clinic terminal for scripts and SSH.

Invariants:
- Writes to the EHR run only after the clinician types "y" at the approval prompt, which names
  the patient written to (and says when that is not the current patient) and shows the exact
  arguments; anything else (including end of input) rejects them.
- The session has a current patient, the line session's counterpart of the terminal's open
  patient (``CurrentPatient``): set by ``/patient ID``, or after a turn by the patient of its
  last successful record call, else its one unique search match, else the one patient ID in the
  clinician's words that no call refused; a search with several matches clears it (the
  clinician is asked which one), ``/patient`` closes it. It is shown in the prompt and passed
  with every question, so reads use it and a write can only reach it through the approval;
  every change is announced.
- When clinician accounts exist the session starts with sign-in (name, then password; the
  account's lock-out applies) and nothing is loaded before it succeeds; the clinician is the
  author of every write (the servers' ``APPLIANCE_USER``) and is named in every approval and
  carried by its result. With no accounts, writes are attributed to the operator, as it says.
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field

from appliance.agent.state import AgentState
from appliance.config import Settings
from appliance.errors import ApplianceError
from appliance.tools.base import Approval, signed_by
from appliance.wording import action_words
from common.operator import operator_name
from common.patient_ids import is_patient_id
from mcp_servers.contracts import TOOL_SERVERS

HELP = """Type a question and press Enter.
  /patient ID   make a patient current (their ID is passed with every question)
  /patient      close the current patient
  /trace        show the last turn's reasoning trace
  /quit         leave (Ctrl-D works too)
A patient also becomes current when a search finds exactly one, or when you name their ID."""
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


def ask_approval(tool: str, args: dict, current: CurrentPatient | None = None, safety=None,
                 author: str | None = None) -> Approval:
    print(f"\nThe assistant proposes a change to the record: {action_words(tool, args)}")
    pid = args.get("patient_id")
    if pid:
        other = current is not None and current.patient_id is not None and pid != current.patient_id
        shown = current.label(pid) if current is not None else pid
        print(f"Patient: {shown}" + ("  (NOT the current patient)" if other else ""))
    if author:
        print(f"Author: {author}")
    if safety is not None:
        print(safety.formatted())
    print(json.dumps(args, indent=2))
    try:
        answer = input("Approve this write? [y/N] ").strip().lower()
    except EOFError:
        answer = ""
    if answer in ("y", "yes"):
        return Approval(True, args)
    return Approval(False, args, "rejected at the terminal")


def session_clinician(settings: Settings) -> tuple[str | None, str]:
    """Sign the clinician in when accounts exist: (account name or None, the line saying who writes)."""
    from appliance.accounts import AccountStore
    from appliance.sign_in import line_sign_in

    store = AccountStore.from_settings(settings)
    if not store.exists():
        return None, (f"No clinician accounts on this appliance: writes are attributed to the operator, "
                      f"{operator_name()} (`appliance user add NAME` creates an account).")
    account = line_sign_in(store)
    return account.name, f"Signed in as {account.label}: your writes carry your name."


def interactive_session(settings: Settings, patient_id: str | None = None, script: dict | None = None) -> int:
    from appliance.runtime import build_agent

    clinician, who = session_clinician(settings)
    print(who, flush=True)
    print("Offline clinical assistant. Loading the model...", flush=True)
    current = CurrentPatient()
    author = clinician or operator_name()
    approver = signed_by(lambda tool, args, safety=None: ask_approval(tool, args, current, safety, author), author)
    agent, tools = build_agent(settings, script, approver=approver, clinician=clinician)
    print(f"Ready ({settings.model}). {HELP}\n", flush=True)
    if agent.model_notice:
        print(f"*** {agent.model_notice.upper()} ***\n", flush=True)
    if patient_id is not None:
        _set_patient(current, patient_id)
    history: list[tuple[str, str]] = []
    last = None
    with tools:
        while True:
            try:
                line = input(f"[{current.label()}] > ").strip()
            except EOFError:
                print()
                return 0
            if not line:
                continue
            if line in ("/quit", "/exit"):
                return 0
            if line == "/patient" or line.startswith("/patient "):
                _set_patient(current, line[len("/patient"):].strip() or None)
                continue
            if line == "/trace":
                for event in last.trace if last else []:
                    print(json.dumps(event.to_dict(), default=str))
                continue
            try:
                last = agent.run_turn(
                    line, history=history, patient_id=current.patient_id,
                    on_token=lambda piece: print(piece, end="", flush=True), cancel=threading.Event(),
                )
            except ApplianceError as exc:
                print(f"\n[problem] {exc}", file=sys.stderr)
                continue
            print()
            if last.disclaimer:
                print(last.disclaimer)
            if last.model_notice:
                print(f"[{last.model_notice}]")
            change = current.after_turn(last.state)
            if change:
                print(change)
            print()
            history += [("user", line), ("assistant", last.response)]


def _set_patient(current: CurrentPatient, patient_id: str | None) -> None:
    if patient_id is not None and not is_patient_id(patient_id):
        print(f"'{patient_id}' is not a patient ID (letters, digits, '-' and '.', up to 64 characters).")
        return
    unchanged = f"Current patient: {current.label()}." if current.patient_id else "No current patient."
    print(current.switch(patient_id) or unchanged)
