"""One conversation with the agent, as both front ends hold it: the current patient, when a new
conversation starts, the history, what each exchange saves and how a saved one is resumed. The
clinic terminal and the line session render it and read keys or lines; they decide nothing here.

Invariants:
- The rule for a new conversation (``rule.starts_new_conversation``) is applied here only: when
  the clinician opens a patient (``open_patient``, every time, even the current one), and before
  the next question when a turn made another patient current (``follow_turn``, then
  ``before_question``: the answer that named them stays in the conversation that asked); both
  front ends call these the same way after every answered turn and before every question. A
  resumed session's patient is current without it. A new conversation leaves the previous one
  saved; one patient's facts are never another's context.
- ``history`` holds only complete exchanges, so a stopped or failed answer is never context for
  a later question; ``about`` holds every patient the conversation's exchanges touched.
- Every exchange is saved in the one sessions store (``appliance.accounts.sessions``) with the
  words decided here: the answer as shown (the safety check's findings first, patient IDs the
  turn and the conversation do not account for hidden; an answer made by code, such as a
  prescreen, is a ``CodeAnswer``), a stopped turn's ``turn_outcome`` words, a failed turn's
  problem. The saved session is created by the first exchange, with the patient
  current then; a later open of the patient is recorded on it.
- A storage problem is said once through ``report`` (one line, no patient data) and the
  conversation goes on unsaved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from appliance.accounts.sessions import (
    Session,
    SessionStore,
    SessionStoreError,
    StoredMessage,
)
from appliance.conversation.current import CurrentPatient
from appliance.conversation.patient_choice import Shown
from appliance.conversation.rule import starts_new_conversation, turn_patients
from appliance.conversation.turn_outcome import stopped_words
from appliance.screen_text import allowed_patient_ids, screen_safe
from appliance.wording import safety_lines


@dataclass(frozen=True)
class Opened:
    """What opening a patient did: ``announced`` (the change in words, None when the patient was
    already current) and ``new_conversation`` (the previous conversation was set aside, saved)."""

    announced: str | None
    new_conversation: bool


@dataclass
class CodeAnswer:
    """An answer made by code outside the agent (a trial prescreen), as ``answered`` reads a
    turn's result: no trace, no safety findings, no agent state."""

    response: str
    kind: str = "answer"
    disclaimer: str | None = None
    trace: list = field(default_factory=list)
    safety: list = field(default_factory=list)
    state: None = None


def resume_problem(target: str | None, path: Path | None = None) -> str | None:
    """Why a saved session ``target`` (an ID; "latest" always opens) cannot be reopened, in one
    line, checked before a front end starts; None when it can (or none was asked for)."""
    if target is None or target == "latest":
        return None
    try:
        SessionStore(path).get_session(target)
    except SessionStoreError as exc:
        return f"cannot reopen session {target}: {exc}"
    return None


def _dicts(trace: Iterable) -> list[dict]:
    return [e if isinstance(e, dict) else e.to_dict() for e in trace]


class Conversation:
    """One conversation with the agent, held by a front end (see the module docstring)."""

    def __init__(self, model: str | None, store: SessionStore | None = None,
                 report: Callable[[str], None] = lambda line: None):
        self.model, self.store, self.report = model, store, report
        self.current = CurrentPatient()
        self.shown = Shown()  # the last list of patients the front end showed: "the second one"
        self.session: Session | None = None
        self.history: list[tuple[str, str]] = []
        self.about: set[str] = set()  # every patient this conversation's exchanges touched
        self._settled: str | None = None  # the patient the conversation last went on with

    @classmethod
    def in_store(cls, model: str | None, path: Path | None = None,
                 report: Callable[[str], None] = lambda line: None) -> Conversation:
        """A conversation saved in the sessions store at ``path`` (the default store when None)."""
        try:
            store = SessionStore(path)
        except SessionStoreError as exc:
            report(f"Sessions will not be saved: {exc}")
            store = None
        return cls(model, store, report)

    @property
    def patient_id(self) -> str | None:
        return self.current.patient_id

    # -- the patient -------------------------------------------------------------------------
    def starts_new(self, patient_id: str | None) -> bool:
        """True when opening ``patient_id`` now would start a new conversation."""
        return starts_new_conversation(self.about, patient_id)

    def open_patient(self, patient_id: str | None, name: str | None = None) -> Opened:
        """The clinician opens ``patient_id`` (None closes the patient): the rule decides whether a
        new conversation starts; the saved session records its current patient."""
        if name and patient_id:
            self.current.names[patient_id] = name
        new = self.starts_new(patient_id)
        if new:
            self.start_new()
        announced = self.current.switch(patient_id)
        self._settled = patient_id
        if announced is not None:
            self._record_patient()
        return Opened(announced, new)

    def follow_turn(self, state) -> str | None:
        """After a turn: learn names from its results and make the patient it settled on current
        (``current.turn_patient``); the rule waits for the next question (``before_question``).
        The change in words, or None; an answer made by code (``CodeAnswer``: no state) changes
        nothing."""
        if state is None:
            return None
        announced = self.current.after_turn(state)
        if announced is not None:
            self._record_patient()
        return announced

    def before_question(self) -> bool:
        """Before a question goes to the agent: True when a turn made another patient current since
        the conversation last went on and the rule starts a new conversation for them."""
        followed, self._settled = self.patient_id != self._settled, self.patient_id
        new = followed and self.starts_new(self.patient_id)
        if new:
            self.start_new()
        return new

    def start_new(self) -> None:
        """Set this conversation aside (it stays saved): the next exchange starts a new session."""
        self.session, self.history, self.about = None, [], set()

    # -- saving and resuming -----------------------------------------------------------------
    def resume(self, target: str) -> tuple[Session, list[StoredMessage]] | None:
        """Reopen a saved session ("latest" or its ID): its complete exchanges become the history,
        its patients what the conversation is about, its patient current. None when there is none
        (or the store could not read it; that is reported)."""
        if self.store is None:
            return None
        session = self.store_call(self.store.latest_session) if target == "latest" else \
            self.store_call(self.store.get_session, target)
        messages = self.store_call(self.store.messages, session.id) if session is not None else None
        if session is None or messages is None:
            return None
        self.session = session
        self.history = [(m.role, m.text) for m in messages if m.status == "complete"]
        self.about = set(session.patient_ids)
        self.current.switch(session.patient_id)
        self._settled = session.patient_id
        return session, messages

    def answered(self, question: str, patient_id: str | None, result) -> str:
        """A turn's answer (``appliance.agent`` result): the text to show, which is saved too; the
        exchange joins the history. ``patient_id`` is the patient current when it was asked."""
        allowed = allowed_patient_ids(getattr(result, "state", None), self.about | ({patient_id} - {None}))
        response = screen_safe(result.response, allowed)  # never another patient's ID on screen
        shown = "\n\n".join(["\n".join(safety_lines(entry)) for entry in result.safety] + [response])
        self._save(question, shown, result.kind, "complete", patient_id, _dicts(result.trace))
        self.history += [("user", question), ("assistant", response)]
        self.shown.after_answer(result.response)
        return shown

    def stopped(self, question: str, patient_id: str | None, trace: Iterable) -> str:
        """A turn the clinician stopped: what it wrote and did not, in words (saved, not history)."""
        trace = list(trace)
        said = stopped_words(trace)
        self._save(question, f"(cancelled by the clinician; {said})", "answer", "cancelled", patient_id,
                   _dicts(trace))
        return said

    def failed(self, question: str, patient_id: str | None, trace: Iterable, problem: str) -> None:
        """A turn that could not be answered: saved with its problem, not history."""
        self._save(question, f"(not answered: {problem})", "notice", "failed", patient_id, _dicts(trace))

    def _save(self, question: str, reply: str, kind: str, status: str, patient_id: str | None,
              trace: list[dict]) -> None:
        self.about |= turn_patients(patient_id, trace)
        if self.store is None:
            return
        if self.session is None:
            self.session = self.store_call(self.store.create_session, model=self.model, patient_id=patient_id)
        if self.session is not None:
            self.store_call(self.store.add_exchange, self.session.id, question, reply, kind=kind, status=status,
                       patient_id=patient_id, trace=trace)

    def _record_patient(self) -> None:
        if self.session is not None and self.store is not None:
            self.store_call(self.store.set_patient, self.session.id, self.patient_id)

    def store_call(self, fn, *args, **kwargs):
        """``fn`` on the store; a storage problem is reported and gives None."""
        try:
            return fn(*args, **kwargs)
        except SessionStoreError as exc:
            self.report(f"Session storage problem: {exc}")
            return None
