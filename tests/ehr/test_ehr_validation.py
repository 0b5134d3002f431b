"""Plausibility checks for clinician-entered fields."""

from __future__ import annotations

import pytest

from ehr_db import validation
from ehr_db.errors import InvalidField


@pytest.mark.parametrize("value", ["500 mg", "500mg", "10 mg/kg", "1 tablet", "2 puffs", "0.5 mg", "1-2 tablets",
                                   "5 mL", "1/2 tablet", "40 mg IV", "1 g", "22 units", "90 mg/kg/day",
                                   "0.4 mg sublingual", " 81 mg "])
def test_plausible_dosages_pass(value):
    assert validation.dosage(value) == value.strip()


@pytest.mark.parametrize("value", ["500", "mg", "take one", "lots", "metformin", "500 elephants", "", "   "])
def test_implausible_dosages_fail(value):
    with pytest.raises(InvalidField) as exc:
        validation.dosage(value)
    assert exc.value.field == "dosage"


@pytest.mark.parametrize("value", ["once daily", "BID", "bid", "every 8 hours", "q6h", "PRN", "q4-6h prn",
                                   "twice daily", "every 4-6 hours as needed for pain", "at bedtime",
                                   "three times daily with meals", "daily", "once weekly", "b.i.d.", "TID",
                                   "QHS", "every other day", "once daily before breakfast", "as needed"])
def test_plausible_frequencies_pass(value):
    assert validation.frequency(value) == value.strip()


@pytest.mark.parametrize("value", ["sometimes", "whenever", "8", "daily daily x", "500 mg", ""])
def test_implausible_frequencies_fail(value):
    with pytest.raises(InvalidField) as exc:
        validation.frequency(value)
    assert exc.value.field == "frequency"


@pytest.mark.parametrize("value,expected", [("mild", "mild"), ("Severe", "severe"), (None, None)])
def test_severity(value, expected):
    assert validation.severity(value) == expected


@pytest.mark.parametrize("value", ["extreme", "", 3])
def test_bad_severity(value):
    with pytest.raises(InvalidField, match="severity"):
        validation.severity(value)


def test_error_reason_does_not_echo_the_value():
    with pytest.raises(InvalidField) as exc:
        validation.dosage("secret-value 123")
    assert "secret-value" not in str(exc.value)
