"""One rule for when a new conversation starts (``appliance.conversation``): as a table, then the
same sequence of patient switches through the clinic terminal (Pilot) and the line session (in
process), whose saved conversations must come out the same."""

from __future__ import annotations

import pytest

from appliance.accounts.sessions import SessionStore
from appliance.conversation import starts_new_conversation, turn_patients
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
