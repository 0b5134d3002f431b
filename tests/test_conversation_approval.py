"""The approval round trip as the conversation core holds it (``appliance.conversation.approval``),
the terminal's dialog and the line session's prompt alike: what is asked about a write and what
the clinician's answer means, as tables. Every door's decision under the one safety policy is
tests/safety/test_one_policy_every_door.py."""

from __future__ import annotations

import pytest

from appliance.conversation.approval import answered, asked
from appliance.conversation.current import CurrentPatient
from appliance.safety.report import CHECKS, Finding, SafetyReport

ARGS = {"patient_id": "pat-001", "medication_name": "amoxicillin", "dosage": "500 mg"}
CLEAN = SafetyReport("amoxicillin", ("amoxicillin",), ("amoxicillin",), (), dict.fromkeys(CHECKS, True))
ALLERGY = SafetyReport("amoxicillin", ("amoxicillin",), ("amoxicillin",),
                       (Finding("allergy", "high", "recorded penicillin allergy"),), dict.fromkeys(CHECKS, True))
RIGHT = "correct horse"


def check(password):
    return password == RIGHT


def no_accounts(password):
    return None


ANSWERS = [
    # (case, approved, safety, reason, password, reauthenticate,
    #  (approved, reason, override_reason, reauthenticated, password kept))
    ("reject, no words", False, ALLERGY, None, None, check, (False, None, None, False, None)),
    ("reject with words", False, None, "wrong patient", None, check, (False, "wrong patient", None, False, None)),
    ("approve, no safety check", True, None, None, None, check, (True, None, None, False, None)),
    ("approve a clean report: no override", True, CLEAN, "fine", RIGHT, check, (True, "fine", None, False, None)),
    ("override with a reason and the password", True, ALLERGY, "  allergy   delabelled by allergist ", RIGHT, check,
     (True, "  allergy   delabelled by allergist ", "allergy delabelled by allergist", True, RIGHT)),
    ("override with a wrong password", True, ALLERGY, "delabelled", "guess", check,
     (True, "delabelled", "delabelled", False, "guess")),
    ("override with no reason", True, ALLERGY, "   ", RIGHT, check, (True, "   ", None, True, RIGHT)),
    ("override where there are no accounts", True, ALLERGY, "delabelled", None, no_accounts,
     (True, "delabelled", "delabelled", None, None)),
]


@pytest.mark.parametrize("case,approved,safety,reason,password,reauthenticate,expected", ANSWERS,
                         ids=[a[0] for a in ANSWERS])
def test_what_the_answer_means(case, approved, safety, reason, password, reauthenticate, expected):
    decision = answered(dict(ARGS), approved, safety, reason=reason, password=password, reauthenticate=reauthenticate)
    assert decision.args == ARGS
    assert (decision.approved, decision.reason, decision.override_reason, decision.reauthenticated,
            decision.password) == expected


def test_a_rejection_without_words_may_carry_the_front_end_s():
    assert answered(ARGS, False, rejected="rejected at the terminal").reason == "rejected at the terminal"
    assert answered(ARGS, False, reason="not now", rejected="rejected at the terminal").reason == "not now"


@pytest.mark.parametrize("current,args,expected", [
    (CurrentPatient("pat-001", {"pat-001": "Maria Garcia"}), ARGS, ("pat-001 (Maria Garcia)", False)),
    (CurrentPatient("abc-123", {"pat-001": "Maria Garcia"}), ARGS, ("pat-001 (Maria Garcia)", True)),
    (CurrentPatient(), ARGS, ("pat-001", False)),
    (None, ARGS, ("pat-001", False)),
    (CurrentPatient("abc-123"), {"note_text": "no patient named"}, ("", False)),
], ids=["the current patient", "another patient", "no current patient", "no conversation", "no patient named"])
def test_what_is_asked_names_the_patient_written_to(current, args, expected):
    question = asked(args, current, ALLERGY)
    assert (question.patient, question.not_current) == expected and question.needs_override
    assert not asked(args, current, CLEAN).needs_override
