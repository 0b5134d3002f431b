"""Reading a switch from the clinician's words (``medication.changes.read_change``): the order's
own drug first, then the drug it is switched to with that drug's dose and frequency; the old
drug's words never give the new drug a dose, and a switch with no old drug is no switch of an
order."""

from __future__ import annotations

import pytest

from appliance.medication.changes import read_change
from appliance.medication.names import DrugRecogniser


@pytest.fixture(scope="module")
def drugs() -> DrugRecogniser:
    return DrugRecogniser()


@pytest.mark.parametrize("text, old, new, dosage, frequency, reason", [
    ("switch lisinopril to losartan 50 mg daily", "lisinopril", "losartan", "50 mg", "daily", None),
    ("change lisinopril to losartan 50 mg once daily", "lisinopril", "losartan", "50 mg", "once daily", None),
    ("switch from lisinopril to losartan 50 mg daily", "lisinopril", "losartan", "50 mg", "daily", None),
    ("switch her lisinopril to losartan 25 mg qd due to cough", "lisinopril", "losartan", "25 mg", "qd", "cough"),
    ("switch lisinopril 10 mg to losartan 50 daily: cough", "lisinopril", "losartan", "50", "daily", "cough"),
    ("switch warfarin to apixaban 5 mg bid", "warfarin", "apixaban", "5 mg", "bid", None),
    ("please switch augmentin to doxycycline 100 mg bid x 7 days", "amoxicillin-clavulanate", "doxycycline",
     "100 mg", "bid", None),
    ("switch lisinopril to losartan", "lisinopril", "losartan", None, None, None),
])
def test_a_switch_names_the_old_order_and_the_new_drugs_order(drugs, text, old, new, dosage, frequency, reason):
    change = read_change(text, drugs)
    assert change.action == "change" and change.switch_to and change.new_order is not None
    assert change.generic == old  # the old order's own words ("lisinopril 10 mg") stay the old order's
    assert (change.new_order.generic, change.new_order.dosage_text, change.new_order.frequency_text) == \
        (new, dosage, frequency)
    assert change.reason == reason


@pytest.mark.parametrize("text, generic, dosage", [
    ("switch to losartan 50 mg daily", "losartan", "50 mg"),  # no old drug: a new prescription
    ("switch amlodipine to 10 mg daily", "amlodipine", "10 mg"),  # one drug: its own new dose
    ("switch metformin to metformin er 500 mg daily", "metformin", "500 mg"),  # the same generic
    # a second drug named in the reason is no switch: the order's own new dose
    ("decrease warfarin to 2.5 mg daily due to the new amiodarone", "warfarin", "2.5 mg"),
    ("reduce simvastatin to 20 mg daily because of amlodipine", "simvastatin", "20 mg"),
    ("decrease warfarin dose due to amiodarone", "warfarin", None),
])
def test_no_second_drug_is_no_switch_of_an_order(drugs, text, generic, dosage):
    change = read_change(text, drugs)
    assert change.new_order is None and change.generic == generic and change.order.dosage_text == dosage
    assert change.switch_to == text.startswith("switch to")


def test_the_approval_says_a_switch_stops_the_old_order():
    from appliance.wording import action_words

    args = {"patient_id": "abc-123", "medication_name": "lisinopril", "new_medication_name": "losartan",
            "dosage": "50 mg", "frequency": "daily", "reason": "cough"}
    assert action_words("change_medication_order", args) == \
        "Switch lisinopril to losartan 50 mg daily (stops lisinopril) (reason: cough)"
    plain = {**args, "new_medication_name": None, "reason": None}
    assert action_words("change_medication_order", plain) == "Change lisinopril to 50 mg daily"


def test_the_dialog_labels_the_new_drug_switch_to():
    from appliance.agent.trace_words import arg_word

    assert arg_word("new_medication_name") == "switch to" and arg_word("medication_name") == "medication"
