"""One rule for when a new conversation starts (``appliance.conversation``): as a table, then as the
conversation core applies it to sequences of opens, questions and turns that read another
patient, then the same sequence of patient switches through the clinic terminal (Pilot) and the
line session (in process), whose saved conversations must come out the same. A longer script
over the real record is tests/tui/test_one_script_both_ends.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.accounts.sessions import SessionStore
from appliance.agent.state import AgentState, ToolResult
from appliance.conversation import Conversation, starts_new_conversation, turn_patients
from tests.line_session_driver import run_session
from tests.tui.helpers import (
    IC,
    SY,
    ask,
    chart,
    intent,
    make_app,
    ready,
    settle,
    wait_until,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

RULE = [
    ("empty conversation", set(), "abc-123", False),
    ("same patient again", {"abc-123"}, "abc-123", False),
    ("another patient", {"abc-123"}, "pat-002", True),
    ("closing the patient", {"abc-123"}, None, False),
    ("about two, opening one of them", {"abc-123", "pat-002"}, "abc-123", True),
]


@pytest.mark.parametrize("case,about,opened,new", RULE, ids=[r[0] for r in RULE])
def test_the_rule(case, about, opened, new):
    assert starts_new_conversation(about, opened) is new


def test_a_turn_is_about_its_patient_and_every_patient_its_calls_named():
    trace = [{"node": "TOOL_EXECUTE", "args": {"patient_id": "pat-002"}}, {"node": "SYNTHESIZE"}]
    assert turn_patients("abc-123", trace) == {"abc-123", "pat-002"}
    assert turn_patients(None, []) == set()


class Answered:
    """What the core reads of an agent turn's result (``TurnResult``): its answer, its trace and
    the state its patient is read from."""

    def __init__(self, text: str, read: str | None = None):
        self.response, self.kind, self.safety = text, "answer", []
        calls = [ToolResult("get_patient_chart", "Patient Chart", {"patient_id": read}, {}, "ok")] if read else []
        self.state = AgentState(user_query=text, tool_results=tuple(calls))
        self.trace = [{"node": "TOOL_EXECUTE", "tool": "get_patient_chart", "args": {"patient_id": read}}] \
            if read else []  # as saved (TraceEvent.to_dict)


def run_steps(conversation: Conversation, steps: list[tuple]) -> None:
    """("open", ID or None): the clinician opens; ("ask", ID read or None): a question answered,
    reading that patient's chart; ("follow",): the current patient follows the last turn, as both
    front ends do after every answered turn; a question first applies the rule to a patient a
    turn made current."""
    last = None
    for step, *arg in steps:
        if step == "open":
            conversation.open_patient(arg[0])
        elif step == "follow":
            conversation.follow_turn(last.state)
        else:
            conversation.before_question()
            last = Answered(f"Answer {len(conversation.history)}.", arg[0] if arg else None)
            conversation.answered("A question?", conversation.patient_id, last)


SEQUENCES = [
    ("a switch after a question", [("open", "abc-123"), ("ask",), ("open", "pat-002"), ("ask",)],
     [("abc-123",), ("pat-002",)]),
    ("a switch before any question", [("open", "abc-123"), ("open", "pat-002"), ("ask",)], [("pat-002",)]),
    ("closing the patient keeps the conversation", [("open", "abc-123"), ("ask",), ("open", None), ("ask",)],
     [("abc-123",)]),
    ("a turn reading another patient, not yet followed, keeps the conversation",
     [("open", "abc-123"), ("ask", "pat-002"), ("ask",)], [("abc-123", "pat-002")]),
    ("a followed patient splits at the next question (both front ends)",
     [("open", "abc-123"), ("ask", "pat-002"), ("follow",), ("ask",)], [("abc-123", "pat-002"), ("pat-002",)]),
    ("reopening the open patient of a conversation about two",
     [("open", "abc-123"), ("ask", "pat-002"), ("open", "abc-123"), ("ask",)],
     [("abc-123", "pat-002"), ("abc-123",)]),
]


@pytest.mark.parametrize("case,steps,expected", SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_the_core_applies_the_rule(tmp_path, case, steps, expected):
    store = SessionStore(tmp_path / "sessions.sqlite")
    run_steps(Conversation("test", store), steps)
    assert conversations(store) == expected


def test_a_resumed_conversation_goes_on_with_its_complete_exchanges_and_patients(tmp_path):
    store = SessionStore(tmp_path / "sessions.sqlite")
    first = Conversation("test", store)
    run_steps(first, [("open", "abc-123"), ("ask", "pat-002")])
    first.stopped("Stopped?", "abc-123", [])
    first.failed("Failed?", "abc-123", [], "the model stopped")
    again = Conversation("test", store)
    session, messages = again.resume("latest")
    assert session.id == first.session.id and len(messages) == 6
    assert again.history == first.history == [("user", "A question?"), ("assistant", "Answer 0.")]
    assert (again.patient_id, again.about) == ("abc-123", {"abc-123", "pat-002"})
    assert [m.text for m in messages if m.status != "complete" and m.role == "assistant"] == [
        "(cancelled by the clinician; nothing was written to the record)", "(not answered: the model stopped)"]
    assert again.open_patient("abc-123").new_conversation  # about two: opening one of them starts anew


def test_a_store_that_cannot_open_is_said_once_and_the_conversation_goes_on(tmp_path):
    said: list[str] = []
    (tmp_path / "sessions.sqlite").mkdir()  # a folder where the database should be
    conversation = Conversation.in_store("test", tmp_path / "sessions.sqlite", report=said.append)
    run_steps(conversation, [("open", "abc-123"), ("ask",), ("ask",)])
    assert conversation.store is None and len(said) == 1 and said[0].startswith("Sessions will not be saved")
    assert len(conversation.history) == 4


ROOT = Path(__file__).resolve().parents[2]
CORE_ONLY = ("starts_new_conversation", "turn_patients", "SessionStore", "add_exchange", "create_session")


def test_the_front_ends_leave_the_rule_and_the_store_to_the_core():
    """Neither front end applies the rule or writes the sessions store itself: both go through
    ``Conversation`` (they may read the store's record types to show them)."""
    views = [*(ROOT / "tui").rglob("*.py"), *(ROOT / "appliance/line_session").glob("*.py")]
    assert len(views) > 20
    for path in views:
        source = path.read_text()
        assert not [name for name in CORE_ONLY if name in source], path.relative_to(ROOT)


# (open this patient, then ask a question) in order; John Smith -> Aisha Patel among them
SWITCHES = ["abc-123", "abc-123", "pat-004", "pat-004", "abc-123", None, "pat-002"]
NAMES = {"abc-123": "John Smith", "pat-004": "Aisha Patel", "pat-002": "James Wilson"}


def script(n: int) -> dict:
    return {IC: [intent()] * n, SY: [f"Answer {i}." for i in range(n)]}


def charts() -> dict:
    return {"get_patient_chart": [{"result": chart(pid, NAMES[pid])} for pid in SWITCHES if pid] * 2}


def conversations(store: SessionStore) -> list[tuple[str, ...]]:
    """Each saved conversation's patients, oldest first."""
    return [tuple(sorted(s.patient_ids)) for s in reversed(store.list_sessions())]


async def test_the_terminal_and_the_line_session_split_conversations_alike(tmp_path, monkeypatch):
    app, _, _ = make_app(tmp_path / "tui", script(len(SWITCHES)), charts())
    (tmp_path / "tui").mkdir()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        for i, pid in enumerate(SWITCHES):
            app.open_patient(pid, NAMES.get(pid)) if pid else app.action_close_patient()
            await settle(pilot)
            await ask(pilot, f"Question {i}?")
            await wait_until(pilot, lambda: app.turn is None, what=f"answer {i}")
            await settle(pilot)
    terminal = conversations(SessionStore(tmp_path / "tui" / "sessions.sqlite"))

    lines = []
    for i, pid in enumerate(SWITCHES):
        lines += [f"/patient {pid}" if pid else "/patient", f"Question {i}?"]
    out, _, _ = run_session(monkeypatch, tmp_path / "line", lines + ["/quit"], script(len(SWITCHES)), charts())
    line_session = conversations(SessionStore())

    assert terminal == [("abc-123",), ("pat-004",), ("abc-123",), ("pat-002",)]
    assert line_session == terminal
    assert out.count("A new conversation starts for") == 3
