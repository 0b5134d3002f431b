"""The interactive headless session: a line-based clinic terminal for scripts and SSH.

Invariants:
- Writes to the EHR run only after the clinician types "y" at the approval prompt, which names
  the patient written to (and says when that is not the current patient) and shows the exact
  arguments; anything else (including end of input) rejects them.
- The session is a view over the conversation core (``appliance.conversation.Conversation``), the
  one the terminal uses: it holds the current patient, the history, what is saved and when a new
  conversation starts. The current patient is set by ``/patient ID``, ``/find`` or a choice in
  words (opened: the core's rule decides whether a new conversation starts), or after a turn by
  the patient the turn settled on (``Conversation.follow_turn``; the rule is applied before the
  next question); ``/patient`` closes it. It is shown in the prompt and passed with every question, so reads use
  it and a write can only reach it through the approval; every change is announced.
- When clinician accounts exist the session starts with sign-in (name, then password; the
  account's lock-out applies) and nothing is loaded before it succeeds; the clinician is the
  author of every write (the servers' ``APPLIANCE_USER``) and is named in every approval and
  carried by its result. With no accounts, writes are attributed to the operator, as it says.
  ``/lock`` clears the screen and asks for that clinician's password only (the lock-out
  applies); end of input there signs out and ends the session.
- Every exchange (answered, stopped or failed) is saved by the core in the sessions store the
  terminal uses, so ``--resume`` / ``--session ID`` (here or in the terminal) reopens it: the
  conversation is shown again, its complete exchanges are the context, its patient is current
  again (confirmed). A storage problem is one line; the session goes on without saving.
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
from appliance.conversation import (
    CodeAnswer,
    Conversation,
    CurrentPatient,
    resume_problem,
)
from appliance.conversation.approval import answered, asked
from appliance.conversation.patient_choice import resolve
from appliance.errors import ApplianceError, GenerationCancelled, TurnCancelled
from appliance.line_session.patients import (
    NEW_CONVERSATION,
    find_patient,
    open_choice,
    searcher,
    set_patient,
)
from appliance.line_session.progress import Progress
from appliance.line_session.saved import (
    lock,
    session_clinician,
    show_resumed,
)
from appliance.tools.base import Approval, signed_by
from appliance.wording import action_words
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


def _override(reauthenticate) -> tuple[str | None, str | None]:
    """The override's reason and the password given again, asked after "y" to a report that needs
    an override (``appliance.safety.policy``): (reason, password), None for what was not given."""
    from appliance.accounts.sign_in import read_password
    from appliance.safety.policy import OverridePolicy

    words = OverridePolicy.from_settings().min_reason_words
    print("Approving this is an override of the safety findings above.")
    try:
        reason = input(f"Why approve it anyway (at least {words} words)? ").strip() or None
        needed = reauthenticate(None) is not None
        return reason, read_password("Your password again, to override: ") if needed else None
    except (EOFError, ApplianceError):
        return None, None


def ask_approval(tool: str, args: dict, current: CurrentPatient | None = None, safety=None,
                 author: str | None = None, reauthenticate=None) -> Approval:
    """The approval prompt: shows what the conversation core says is asked (``asked``) and reads
    the answer, whose meaning is the core's (``answered``)."""
    reauthenticate = reauthenticate or (lambda password: False)
    question = asked(args, current, safety)
    print(f"\nThe assistant proposes a change to the record: {action_words(tool, args)}")
    if question.patient_id:
        print(f"Patient: {question.patient}" + ("  (NOT the current patient)" if question.not_current else ""))
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
        return answered(args, False, rejected="rejected at the terminal")
    reason, password = _override(reauthenticate) if question.needs_override else (None, None)
    return answered(args, True, safety, reason=reason, password=password, reauthenticate=reauthenticate)


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
    conversation = Conversation.in_store(settings.model, report=lambda line: print(f"[{line}]"))
    current = conversation.current
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
    if resume and conversation.store is not None:
        show_resumed(conversation.resume(resume))
    last = None
    interrupts = Interrupts()
    with tools, interrupts.installed():
        if patient_id is not None or conversation.patient_id is not None:
            set_patient(conversation, patient_id or conversation.patient_id, tools,
                        opening=patient_id not in (None, conversation.patient_id))
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
                _prescreen(agent, tools, conversation, settings, interrupts, progress)
                continue
            if line.startswith("/"):
                if not _command(line, conversation, tools, last):
                    print(f"Unknown command {line.split()[0]}.\n{HELP}")
                continue
            choice = resolve(line, conversation.shown, searcher(tools))  # a patient chosen in words, by code
            if choice is not None:
                open_choice(choice, conversation, tools)
                if not choice.question:
                    print()
                    continue
            if conversation.before_question():  # a turn made another patient current
                print(NEW_CONVERSATION.format(conversation.current.label()) + "\n")
            asked_for = conversation.patient_id
            seen: list = []  # the turn's trace as it happens: a stopped turn still knows what it wrote
            progress.start("Reading the request")
            cancel = interrupts.turn_started()
            try:
                # Only checked text is shown: the answer is printed once the turn's checks are
                # done (never streamed); meanwhile the progress line names the step.
                last = agent.run_turn(line, history=list(conversation.history), patient_id=asked_for,
                                      on_event=seen.append, on_step=progress.note, cancel=cancel)
            except (TurnCancelled, GenerationCancelled):  # stopped between steps, or mid-generation
                progress.done()
                print(f"[answer stopped: {conversation.stopped(line, asked_for, seen)}; the session goes on]\n")
                continue
            except ApplianceError as exc:
                progress.done()
                print(f"\n[problem] {exc}", file=sys.stderr)
                conversation.failed(line, asked_for, seen, str(exc))
                continue
            finally:
                interrupts.turn_ended()
                progress.done()  # also when a second Ctrl+C leaves the session
            print(conversation.answered(line, asked_for, last))  # the gate's findings first
            if last.disclaimer:
                print(last.disclaimer)
            if last.model_notice:
                print(f"[{last.model_notice}]")
            change = conversation.follow_turn(last.state)
            if change:
                print(change)
            print()


LINE_MAX_TRIALS = 3  # as the terminal's F6


def _prescreen(agent, tools, conversation: Conversation, settings: Settings, interrupts: Interrupts,
               progress: Progress) -> bool:
    """``/prescreen``: the current patient against recruiting trials (the terminal's F6): code
    reads the chart and decides what it can, the model judges the rest; Ctrl+C stops it."""
    from appliance.prescreen.run import render_text, run_prescreen

    current = conversation.current
    if current.patient_id is None:
        print("Make a patient current first (/patient ID or /find NAME): the prescreen reads their chart.")
        return False
    progress.start("Reading the chart")
    cancel = interrupts.turn_started()
    try:
        result = run_prescreen(agent.model, tools, current.patient_id, max_trials=LINE_MAX_TRIALS,
                               deadline=settings.tool_deadline_seconds, cancel=cancel, progress=progress.note)
    except GenerationCancelled:
        conversation.stopped("/prescreen", current.patient_id, [])
        print("[prescreen stopped: the session goes on]\n")
        return False
    except ApplianceError as exc:
        conversation.failed("/prescreen", current.patient_id, [], str(exc))
        print(f"\n[problem] {exc}", file=sys.stderr)
        return False
    finally:
        interrupts.turn_ended()
        progress.done()
    # saved, and context for follow-up questions, as the terminal's F6 answer is
    answer = CodeAnswer(render_text(result, criteria=False))
    print(conversation.answered("/prescreen", current.patient_id, answer) + "\n")
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


def _command(line: str, conversation: Conversation, tools, last) -> bool:
    """Run a slash command; False when there is no such command."""
    name, _, rest = line.partition(" ")
    rest = rest.strip()
    if name == "/patient":
        set_patient(conversation, rest or None, tools)
    elif name == "/find":
        find_patient(rest, conversation, tools)
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


