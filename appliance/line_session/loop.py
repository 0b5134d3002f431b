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
  ``/lock`` clears the screen and asks for that clinician's password only (the lock-out
  applies); end of input there signs out and ends the session.
- Every exchange is saved in the sessions store the terminal uses (``SavedConversation``), so
  ``--resume`` / ``--session ID`` (here or in the terminal) reopens it: the conversation is
  shown again, its complete exchanges are the context, its patient is current again (confirmed).
  As in the terminal, a patient opened by ``/patient`` or ``/find`` while the conversation is
  about another starts a new one (the previous stays saved): one patient's facts are never
  another's context.
  A storage problem is one line; the session goes on without saving.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading

from appliance.accounts.reauthenticate import reauthenticate
from appliance.agent.trace_words import approval_parts, plain, trace_parts
from appliance.config import Settings
from appliance.conversation import starts_new_conversation, turn_patients
from appliance.errors import ApplianceError, GenerationCancelled, TurnCancelled
from appliance.line_session.patients import (
    CurrentPatient,
    find_patient,
    open_choice,
    searcher,
    set_patient,
)
from appliance.line_session.progress import Progress
from appliance.line_session.saved import (
    SavedConversation,
    lock,
    resume_problem,
    session_clinician,
)
from appliance.patient_choice import Shown, resolve
from appliance.screen_text import allowed_patient_ids, screen_safe
from appliance.tools.base import Approval, signed_by
from appliance.turn_outcome import stopped_words
from appliance.wording import action_words, safety_lines
from common.operator import operator_name

HELP = """Type a question and press Enter.
  /patient ID   make a patient current (their ID is passed with every question); shows who and their allergies
  /find NAME    search patients by name (one match becomes current; pick from several in words)
  /patient      close the current patient
  /trace        show the last turn's reasoning trace
  /prescreen    prescreen the current patient for recruiting clinical trials (Ctrl+C stops it)
  /lock         clear the screen until your password is typed again (signed-in sessions)
  /quit         leave (Ctrl-D works too; Ctrl+C stops an answer, twice in a row leaves)
A patient also becomes current when a search finds exactly one, when you name their ID, or in words:
  "pull up james wilson", then "the one born 1967" or "the second one"."""


def _override(safety, reauthenticate) -> tuple[str | None, bool | None, str | None]:
    """The override's reason and the password given again, asked after "y" to a report that needs
    an override (``appliance.safety.policy``): (reason, reauthenticated, password)."""
    from appliance.accounts.sign_in import read_password
    from appliance.safety.policy import OverridePolicy

    words = OverridePolicy.from_settings().min_reason_words
    print("Approving this is an override of the safety findings above.")
    try:
        reason = input(f"Why approve it anyway (at least {words} words)? ").strip() or None
        needed = reauthenticate(None) is not None
        password = read_password("Your password again, to override: ") if needed else None
    except (EOFError, ApplianceError):
        return None, False, None
    return reason, reauthenticate(password), password


def ask_approval(tool: str, args: dict, current: CurrentPatient | None = None, safety=None,
                 author: str | None = None, reauthenticate=None) -> Approval:
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
    if answer not in ("y", "yes"):
        return Approval(False, args, "rejected at the terminal")
    if safety is None or not safety.needs_override:
        return Approval(True, args)
    reason, reauthenticated, password = _override(safety, reauthenticate or (lambda password: False))
    return Approval(True, args, reason, override_reason=reason, reauthenticated=reauthenticated, password=password)


def interactive_session(settings: Settings, patient_id: str | None = None, script: dict | None = None,
                        resume: str | None = None) -> int:
    from appliance.runtime import build_agent

    problem = resume_problem(resume)
    if problem:
        print(f"appliance session: {problem}", file=sys.stderr)
        return 2
    account, accounts, who = session_clinician(settings)
    clinician = account.name if account else None
    print(who, flush=True)
    print("Offline clinical assistant. Loading the model...", flush=True)
    current = CurrentPatient()
    author = clinician or operator_name()
    progress = Progress()

    def approve(tool, args, safety=None):
        with progress.paused():  # the progress line never writes over the approval prompt
            return ask_approval(tool, args, current, safety, author,
                                lambda password: reauthenticate(accounts, clinician, password))

    approver = signed_by(approve, author)
    agent, tools = build_agent(settings, script, approver=approver, clinician=clinician)
    from appliance.runtime import (
        acceptance_status,  # this site's verdict on the model file (appliance.acceptance)
    )

    print(f"Ready ({settings.model}; acceptance: {acceptance_status(settings).line}). {HELP}\n", flush=True)
    if agent.model_notice:
        print(f"*** {agent.model_notice.upper()} ***\n", flush=True)
    history: list[tuple[str, str]] = []
    conversation = SavedConversation(settings.model)
    context: set[str] = set()  # the patients this conversation is about (appliance.conversation)
    if resume and conversation.store is not None:
        history, resumed_patient = conversation.reopen(resume)
        patient_id = patient_id or resumed_patient
        context = set(conversation.session.patient_ids) if conversation.session is not None else set()
    last = None
    patients_shown = Shown()  # the last list of patients shown: "the second one" picks from it
    interrupts = Interrupts()
    with tools, interrupts.installed():
        if patient_id is not None:
            set_patient(current, patient_id, tools)
        settled = current.patient_id  # the patient the conversation last went on with
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
            if line == "/lock":
                if account is None:
                    print("There are no clinician accounts on this appliance, so there is nothing to unlock with "
                          "(`appliance user add NAME` creates one).")
                elif not lock(account, accounts):
                    return 0
                continue
            if line == "/prescreen":
                if _prescreen(agent, tools, current, settings, interrupts, conversation, progress):
                    context.add(current.patient_id)
                continue
            if line.startswith("/"):
                before = current.patient_id
                if not _command(line, current, tools, last, patients_shown):
                    print(f"Unknown command {line.split()[0]}.\n{HELP}")
                if current.patient_id != before and starts_new_conversation(context, current.patient_id):
                    history, context = _new_conversation(conversation, current)
                settled = current.patient_id
                continue
            choice = resolve(line, patients_shown, searcher(tools))  # a patient chosen in words, by code
            if choice is not None:
                open_choice(choice, current, tools)
                if not choice.question:
                    if current.patient_id != settled and starts_new_conversation(context, current.patient_id):
                        history, context = _new_conversation(conversation, current)
                    settled = current.patient_id
                    print()
                    continue
            if current.patient_id != settled and starts_new_conversation(context, current.patient_id):
                history, context = _new_conversation(conversation, current)  # another patient was opened
            settled = current.patient_id
            seen: list = []  # the turn's trace as it happens: a stopped turn still knows what it wrote
            progress.start("Reading the request")
            cancel = interrupts.turn_started()
            try:
                # Only checked text is shown: the answer is printed once the turn's checks are
                # done (never streamed); meanwhile the progress line names the step.
                last = agent.run_turn(line, history=history, patient_id=current.patient_id,
                                      on_event=seen.append, on_step=progress.note, cancel=cancel)
            except (TurnCancelled, GenerationCancelled):  # stopped between steps, or mid-generation
                progress.done()
                said = stopped_words(seen)
                print(f"[answer stopped: {said}; the session goes on]\n")
                context |= turn_patients(current.patient_id, seen)
                conversation.save(line, f"(cancelled: {said})", kind="answer", status="cancelled",
                                  patient_id=current.patient_id, trace=[e.to_dict() for e in seen])
                continue
            except ApplianceError as exc:
                progress.done()
                print(f"\n[problem] {exc}", file=sys.stderr)
                continue
            finally:
                interrupts.turn_ended()
                progress.done()  # also when a second Ctrl+C leaves the session
            response = screen_safe(last.response, allowed_patient_ids(last.state, context | {current.patient_id} - {None}))
            shown = "\n".join(["\n".join(safety_lines(entry)) for entry in last.safety] + [response])
            print(shown)  # the gate's findings first, whatever the answer says
            conversation.save(line, shown, kind=last.kind, status="complete", patient_id=current.patient_id,
                              trace=[e.to_dict() for e in last.trace])
            if last.disclaimer:
                print(last.disclaimer)
            if last.model_notice:
                print(f"[{last.model_notice}]")
            context |= turn_patients(current.patient_id, last.trace)
            change = current.after_turn(last.state)
            if change:
                print(change)
            print()
            history += [("user", line), ("assistant", response)]
            patients_shown.after_answer(last.response)


LINE_MAX_TRIALS = 3  # as the terminal's F6


def _new_conversation(conversation: SavedConversation, current: CurrentPatient) -> tuple[list, set]:
    """As the terminal does (``appliance.conversation``): another patient's facts never become
    this one's context; the previous conversation stays saved."""
    conversation.start_new()
    print(f"A new conversation starts for {current.label()}; the previous one is saved "
          "(`appliance session --session ID` or the terminal's Ctrl+R reopen it).\n")
    return [], set()


def _prescreen(agent, tools, current: CurrentPatient, settings: Settings, interrupts: Interrupts,
               conversation: SavedConversation, progress: Progress) -> bool:
    """``/prescreen``: the current patient against recruiting trials (the terminal's F6): code
    reads the chart and decides what it can, the model judges the rest; Ctrl+C stops it."""
    from appliance.prescreen.run import render_text, run_prescreen

    if current.patient_id is None:
        print("Make a patient current first (/patient ID or /find NAME): the prescreen reads their chart.")
        return False
    progress.start("Reading the chart")
    cancel = interrupts.turn_started()
    try:
        result = run_prescreen(agent.model, tools, current.patient_id, max_trials=LINE_MAX_TRIALS,
                               deadline=settings.tool_deadline_seconds, cancel=cancel, progress=progress.note)
    except GenerationCancelled:
        print("[prescreen stopped: the session goes on]\n")
        return False
    except ApplianceError as exc:
        print(f"\n[problem] {exc}", file=sys.stderr)
        return False
    finally:
        interrupts.turn_ended()
        progress.done()
    text = render_text(result, criteria=False)
    print(text + "\n")
    conversation.save("/prescreen", text, kind="answer", status="complete", patient_id=current.patient_id, trace=[])
    return True


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


def _command(line: str, current: CurrentPatient, tools, last, shown: Shown | None = None) -> bool:
    """Run a slash command; False when there is no such command."""
    name, _, rest = line.partition(" ")
    rest = rest.strip()
    if name == "/patient":
        set_patient(current, rest or None, tools)
    elif name == "/find":
        find_patient(rest, current, tools, shown)
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


