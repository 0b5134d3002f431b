"""Choosing a patient in words (appliance.conversation.patient_choice) as a table: which lines open a patient
by code, which picks from the last list shown, and which go on to the agent untouched."""

from __future__ import annotations

import pytest

from appliance.conversation.patient_choice import (
    Shown,
    only_a_choice,
    open_request,
    resolve,
)
from appliance.tools.base import ToolOutcome

WILSONS = [{"patient_id": f"pat-01{i}", "name": "James Wilson", "birth_date": f"19{50 + 10 * i}-06-01"} for i in range(3)]

OPENS = [
    ("pull up james wilson", ("james wilson", None)),
    ("Pull up James Wilson born 1990", ("James Wilson", "1990")),
    ("open patient Emily Johnson", ("Emily Johnson", None)),
    ("switch to Aisha Patel.", ("Aisha Patel", None)),
    ("James Wilson born 1960-06-01", ("James Wilson", "1960-06-01")),
    ("pull up her chart", None),
    ("pull up the labs", None),
    ("open the chart", None),
    ("find metformin interactions", None),
    ("What is hypertension?", None),
    ("Prescribe ibuprofen 400 mg every 6 hours", None),
    ("metformin born 1990", None),
]


@pytest.mark.parametrize("line,expected", OPENS, ids=[o[0] for o in OPENS])
def test_open_request(line, expected):
    assert open_request(line) == expected


def shown() -> Shown:
    s = Shown()
    s.show(WILSONS)
    return s


@pytest.mark.parametrize("line,picked,only", [
    ("the one born 1960", "pat-011", True),
    ("the second one", "pat-011", True),
    ("3", "pat-012", True),
    ("James Wilson born 1950", "pat-010", True),
    ("what is the INR of the last one?", "pat-012", False),
    ("the one born 1999", None, None),
    ("the second one born 1970", None, None),  # cues disagree: nothing is picked
    ("What is hypertension?", None, None),
])
def test_a_pick_from_the_last_list(line, picked, only):
    chosen = shown().pick(line)
    assert (chosen.patient_id if chosen else None) == picked
    if chosen:
        assert only_a_choice(line, chosen) is only


def search_never(name):
    raise AssertionError("no search was needed")


def test_resolve_picks_then_forgets_the_list():
    s = shown()
    outcome = resolve("the second one", s, search_never)
    assert outcome.opened.patient_id == "pat-011" and not outcome.question
    assert s.candidates == () and resolve("the second one", s, search_never) is None


def test_the_agents_own_question_is_left_to_the_agent():
    s = shown()
    s.after_answer("I found 3 patients matching 'James Wilson'. Which one did you mean?\n"
                   + "\n".join(f"- James Wilson, born {m['birth_date']}, ID {m['patient_id']}" for m in WILSONS))
    assert s.agent_asked and resolve("the second one", s, search_never) is None
    assert resolve("pull up james wilson", s, search_never) is None


def test_a_search_with_several_matches_lists_them_and_a_birth_year_picks_one():
    s = Shown()
    found = ToolOutcome(result={"matches": WILSONS, "total_matches": 3})
    listed = resolve("pull up james wilson", s, lambda name: found)
    assert listed.opened is None and listed.lines[0] == "3 patients match 'james wilson':"
    assert [c.patient_id for c in s.candidates] == ["pat-010", "pat-011", "pat-012"]
    direct = resolve("pull up James Wilson born 1970", Shown(), lambda name: found)
    assert direct.opened.patient_id == "pat-012"


def test_a_failed_search_is_one_line():
    outcome = resolve("pull up james wilson", Shown(), lambda name: ToolOutcome(error_type="timeout", message="x"))
    assert outcome.lines == ["The search could not be done (timeout)."] and outcome.opened is None
