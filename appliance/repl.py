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

import contextlib
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from appliance.agent.state import AgentState
from appliance.config import Settings
from appliance.errors import ApplianceError, TurnCancelled
from appliance.trace_words import approval_parts, plain, trace_parts
from appliance.tools.base import Approval, signed_by
from appliance.wording import action_words, safety_lines
from common.operator import operator_name
from common.patient_ids import is_patient_id
from mcp_servers.contracts import TOOL_SERVERS

HELP = """Type a question and press Enter.
  /patient ID   make a patient current (their ID is passed with every question); shows who and their allergies
  /find NAME    search patients by name (one match becomes current)
  /patient      close the current patient
  /trace        show the last turn's reasoning trace
  /quit         leave (Ctrl-D works too; Ctrl+C stops an answer, twice in a row leaves)
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


class Progress:
    """One progress line on standard error while a turn runs (the node and the elapsed time),
    rewritten in place on a terminal and cleared when the turn ends; nothing when standard error
    is not a terminal (scripts read standard output only)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.live = self.stream.isatty()

    def event(self, event) -> None:
        if self.live:
            elapsed = time.monotonic() - self.started
            self.stream.write(f"\r\033[K  {event.label}... {elapsed:.0f} s")
            self.stream.flush()

    def done(self) -> None:
        if self.live:
            self.stream.write("\r\033[K")
            self.stream.flush()


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
    history: list[tuple[str, str]] = []
    last = None
    interrupts = Interrupts()
    with tools, interrupts.installed():
        if patient_id is not None:
            _set_patient(current, patient_id, tools)
        while True:
            try:
                line = input(f"[{current.label()}] > ").strip()
            except EOFError:
                print()
                return 0
            except KeyboardInterrupt:
                if interrupts.at_prompt():
                    print()
                    return 130
                print("\n(Ctrl+C again to leave, or /quit)")
                continue
            interrupts.reset()
            if not line:
                continue
            if line in ("/quit", "/exit"):
                return 0
            if line.startswith("/"):
                if not _command(line, current, tools, last):
                    print(f"Unknown command {line.split()[0]}.\n{HELP}")
                continue
            progress = Progress()
            cancel = interrupts.turn_started()
            try:
                # The answer is printed once checked (synthesize's guards), never streamed unchecked.
                last = agent.run_turn(line, history=history, patient_id=current.patient_id,
                                      on_event=progress.event, cancel=cancel)
            except TurnCancelled:
                progress.done()
                print("[answer stopped: nothing more was done; the session goes on]\n")
                continue
            except ApplianceError as exc:
                progress.done()
                print(f"\n[problem] {exc}", file=sys.stderr)
                continue
            finally:
                interrupts.turn_ended()
            progress.done()
            for entry in last.safety:  # the gate's findings first, whatever the answer says
                print("\n".join(safety_lines(entry)))
            print(last.response)
            if last.disclaimer:
                print(last.disclaimer)
            if last.model_notice:
                print(f"[{last.model_notice}]")
            change = current.after_turn(last.state)
            if change:
                print(change)
            print()
            history += [("user", line), ("assistant", last.response)]


class Interrupts:
    """Ctrl+C in the line session: during a turn the first press stops the answer (the turn's
    cancel flag) and the session goes on, a second press in the same turn leaves; at the prompt
    the first press says how to leave and a second in a row leaves (exit 130)."""

    def __init__(self):
        self.cancel: threading.Event | None = None
        self.pressed_at_prompt = False

    @contextlib.contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self._handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _handler(self, signum, frame) -> None:
        if self.cancel is not None and not self.cancel.is_set():
            self.cancel.set()
            print("\n[stopping the answer: Ctrl+C again to leave the session]", file=sys.stderr, flush=True)
            return
        raise KeyboardInterrupt

    def turn_started(self) -> threading.Event:
        self.cancel = threading.Event()
        return self.cancel

    def turn_ended(self) -> None:
        self.cancel = None

    def at_prompt(self) -> bool:
        """A press at the prompt; True when it is the second in a row (leave)."""
        second, self.pressed_at_prompt = self.pressed_at_prompt, True
        return second

    def reset(self) -> None:
        self.pressed_at_prompt = False


def _command(line: str, current: CurrentPatient, tools, last) -> bool:
    """Run a slash command; False when there is no such command."""
    name, _, rest = line.partition(" ")
    rest = rest.strip()
    if name == "/patient":
        _set_patient(current, rest or None, tools)
    elif name == "/find":
        _find(rest, current, tools)
    elif name == "/trace":
        if last is None:
            print("No turn yet.")
        for event in last.trace if last else []:
            waited = approval_parts(event)
            if waited:
                print("  " + plain(waited))
            print("  " + plain(trace_parts(event)))
    elif name == "/help":
        print(HELP)
    else:
        return False
    return True


LOOKUP_SECONDS = 20.0


def _find(name: str, current: CurrentPatient, tools) -> None:
    """``/find NAME``: the patients matching, with birth dates and IDs; one match becomes current."""
    if not name:
        print("Type /find and a name, e.g. /find Emily Johnson.")
        return
    outcome = tools.call("search_patient", {"name": name}, LOOKUP_SECONDS)
    if not outcome.ok:
        print(f"The search could not be done ({(outcome.error_type or 'error').replace('_', ' ')}).")
        return
    matches = (outcome.result or {}).get("matches") or []
    current.names.update({m["patient_id"]: m["name"] for m in matches if m.get("patient_id") and m.get("name")})
    if not matches:
        print(f"No patient matches '{name}'.")
        return
    if len(matches) == 1:
        _set_patient(current, matches[0]["patient_id"], tools)
        return
    print(f"{len(matches)} patients match '{name}':")
    for m in matches:
        print(f"  - {m.get('name')}, born {m.get('birth_date') or 'unknown'}, ID {m.get('patient_id')}")
    print("Make one current with /patient ID.")


def _set_patient(current: CurrentPatient, patient_id: str | None, tools=None) -> None:
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
