"""A patient search with a typo offers the closest names in the record (real demo database,
real server in process): the repository's list, the server's one sentence, and the front
ends' reading of it back."""

from __future__ import annotations

import pytest
from test_ehr_server import call_error

from ehr_db.name_match import closest_in, closest_sentence

TYPOS = [
    ("emily jonson", "Emily Johnson"),
    ("Emly Johnson", "Emily Johnson"),
    ("johnson emilly", "Emily Johnson"),
    ("robert chenn", "Robert Chen"),
    ("Maria Garsia", "Maria Garcia"),
]


@pytest.mark.parametrize("typed,meant", TYPOS)
def test_a_typo_offers_the_patient_meant_first(repo, typed, meant):
    result = repo.search_patient(typed)
    assert result["total_matches"] == 0 and result["matches"] == []
    assert result["closest"] and result["closest"][0]["name"] == meant


def test_three_james_wilsons_are_all_offered_for_a_typo(repo):
    offered = repo.search_patient("james wilsen")["closest"]
    assert [m["name"] for m in offered[:3]] == ["James Wilson"] * 3
    assert len({m["patient_id"] for m in offered[:3]}) == 3


def test_nothing_close_offers_nothing(repo):
    assert repo.search_patient("Zzyzx Qwerty")["closest"] == []


def test_the_server_says_no_exact_match_and_names_the_closest(server):
    kind, text = call_error(server, "search_patient", {"name": "emily jonson"})
    assert kind == "not_found" and "emily jonson" in text
    offered = closest_in(text)
    assert offered and offered[0]["name"] == "Emily Johnson" and offered[0]["patient_id"] == "pat-006"
    assert offered[0]["birth_date"]


def test_the_sentence_reads_back_exactly_and_nothing_else_does():
    matches = [{"patient_id": "pat-006", "name": "Emily Johnson", "birth_date": "1984-06-02"},
               {"patient_id": "pat-9.b", "name": "Emily-Jo O'Neil", "birth_date": None}]
    assert closest_in("No patient. " + closest_sentence(matches)) == (
        matches[0], {"patient_id": "pat-9.b", "name": "Emily-Jo O'Neil", "birth_date": None})
    assert closest_in("Closest names in the record: whatever the model wrote.") == ()
    assert closest_in("No patient named 'x' was found.") == ()
    assert closest_sentence([]) == ""
