"""``appliance selftest``, bounded for the fast suite: no durability run and no fault
drill (they start subprocesses; tests/slow/test_selftest_command.py runs the command whole), few
generated calls. The run
builds and deletes its own data home and leaves the one it was given untouched."""

from __future__ import annotations

import json

import pytest

from appliance.cli import main
from appliance.selftest.suite import failures, run_selftest, table

pytestmark = pytest.mark.timeout(120)
HEADLINE = ("writes_lost", "partial_writes", "faults_tried", "faults_survived", "bad_inputs_tried",
            "uncaught_exceptions", "safety_matrix")


@pytest.fixture(scope="module")
def run():
    return run_selftest(bad_inputs=60, crash_writes=0, fault_rounds=0)


def test_the_checks_pass_and_say_what_did_not_run(run):
    assert run["ok"], run["failures"]
    assert set(HEADLINE) <= set(run)
    assert run["safety_matrix"] == {"cases": 299, "missed": 0, "false_clear": 0, "false_alarms": 0,
                                    "blocking": run["safety_matrix"]["blocking"]}
    assert run["bad_inputs_tried"] == 60 and run["uncaught_exceptions"] == 0
    assert run["injection"]["cases"] >= 30 and run["injection"]["failed"] == []
    assert run["audit"]["verified"] and run["audit"]["tamper_caught"]
    data = run["data_matrix"]  # every drug of the data, each brand, each interaction pair both ways
    assert data["drugs"] >= 200 and data["drugs_with_brands"] >= 200 and data["interaction_cases"] >= 3000
    assert data["problems"] == 0
    # Not measured, so no number: never a zero it did not count.
    assert run["writes_lost"] is None and run["partial_writes"] is None and run["durability"] is None
    assert run["faults_tried"] is None and run["faults"] is None
    assert any(item.startswith("durability") for item in run["not_run"])
    assert any(item.startswith("faults") for item in run["not_run"])


def test_the_table_has_one_line_per_check(run):
    text = table(run)
    for label in ("safety matrix", "control matrix", "drug data matrix", "bad inputs tried", "injection", "audit chain", "load held", "writes lost",
                  "faults survived", "uncaught"):
        assert any(line.startswith(label) for line in text.splitlines()), label
    assert text.rstrip().endswith("PASSED")


@pytest.mark.parametrize("change,why", [
    ({"writes_lost": 1}, "committed write(s) lost"),
    ({"partial_writes": 2}, "without their audit row"),
    ({"uncaught_exceptions": 1}, "uncaught exception"),
    ({"safety_matrix": {"missed": 0, "false_clear": 1}}, "false clear"),
    ({"control_matrix": {"missed_hazards": 1, "false_refusals": 0, "safe_orders": 137, "refusal_rate": 0.0}},
     "missed 1 hazard order(s)"),
    ({"control_matrix": {"missed_hazards": 0, "false_refusals": 7, "safe_orders": 137, "refusal_rate": 0.0511}},
     "refused 7 of 137 safe orders"),
    ({"injection": {"failed": ["chart-note-ignore-and-prescribe"]}}, "injection cases failed"),
    ({"data_matrix": {"problems": 1, "not_resolved": [], "unchecked": [], "missed": [{}]}}, "missed 1 interaction"),
    ({"audit": {"verified": True, "tamper_caught": False}}, "went unseen"),
    ({"faults_tried": 6, "faults_survived": 5}, "1 fault(s) not survived"),
])
def test_each_kind_of_failure_fails_the_run(run, change, why):
    assert any(why in f for f in failures({**run, **change}))


def test_the_command_prints_json_and_leaves_the_data_home_alone(appliance_home, capsys):
    assert main(["selftest", "--json", "--bad-inputs", "20", "--crash-writes", "0", "--fault-rounds", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["bad_inputs_tried"] == 20
    assert list(appliance_home.iterdir()) == []  # the live data home was never opened
