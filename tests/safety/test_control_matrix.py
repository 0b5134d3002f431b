"""The control matrix (``appliance.safety.control_matrix``): common safe orders the gate must let
through and hazard orders it must stop, on the real demo databases and the real local drug data,
read the way the agent reads a clinician's words."""

from __future__ import annotations

import pytest

from appliance.safety.control_matrix import (
    CONTROL_CHART,
    check_words,
    hazard_missed,
    hazard_orders,
    run_control_matrix,
    safe_orders,
)
from appliance.selftest.suite import MAX_REFUSAL_RATE


@pytest.fixture(scope="module")
def result(data_home):
    return run_control_matrix(data_home / "ehr.sqlite", data_home / "knowledge.sqlite")


def test_the_tables_are_large_enough_and_well_formed():
    orders = safe_orders()
    assert len(orders) >= 100 and len(set(orders)) == len(orders)
    hazards = hazard_orders()
    assert len(hazards) >= 20 and {h.severity for h in hazards} == {"high"}
    with pytest.raises(ValueError, match="row 1 has 2 fields"):
        hazard_orders("patient\torder\tseverity\tkind\twords\npat-001\taspirin\n")


def test_the_control_chart_is_complete(knowledge):
    report = check_words("lisinopril 10 mg once daily", CONTROL_CHART, knowledge)
    assert report.complete and not report.findings, report.lines()


def test_no_hazard_order_is_missed(result):
    assert result["hazard_orders"] >= 20
    assert result["missed_hazards"] == 0, result["missed"]


def test_a_missed_hazard_is_counted(knowledge):
    hazard = hazard_orders()[0]
    clean = check_words("lisinopril 10 mg once daily", CONTROL_CHART, knowledge)
    assert hazard_missed(hazard, clean)


def test_every_refusal_says_what_was_not_checked(result):
    for refusal in result["refusals"]:
        assert refusal["unchecked"] or refusal["high"], refusal


def test_at_most_2_percent_of_safe_orders_are_refused(result):
    assert result["safe_orders"] >= 100
    assert result["refusal_rate"] <= MAX_REFUSAL_RATE, [(r["order"], r["unchecked"]) for r in result["refusals"]]
