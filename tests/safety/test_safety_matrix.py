"""The safety gate over the real demo charts: 13 patients x 23 drugs, expected findings by hand
(the table is ``appliance/safety/data/safety_matrix.tsv``, read by ``appliance/safety/matrix.py``
and shared with ``appliance selftest``; how it was written is said there).

The test counts missed findings (expected, not reported) and false alarms (reported, not
expected) over the whole matrix and requires both to be zero, and requires every drug unknown to
the local drug data to come back with an ``unknown_drug`` finding, never a clear report.
"""

from __future__ import annotations

from collections import Counter

import pytest

from appliance.safety import check_prescription
from appliance.safety.matrix import DRUGS, EXPECTED, UNKNOWN_TO_DATA, run_matrix
from appliance.safety.matrix import actual as above_info
from appliance.safety.report import UNKNOWN_DRUG_TEXT


def test_the_table_is_complete():
    assert len(EXPECTED) >= 10
    for patient, cells in EXPECTED.items():
        assert tuple(cells) == DRUGS, patient
    assert len(DRUGS) >= 20


@pytest.mark.parametrize("patient", sorted(EXPECTED))
def test_patient_row(patient, chart_of, knowledge):
    chart = chart_of(patient)
    problems = []
    for drug in DRUGS:
        report = check_prescription(drug, chart, knowledge)
        actual, expected = above_info(report), EXPECTED[patient][drug]
        if actual != expected:
            problems.append(f"{drug}: missed {dict(expected - actual)}, false alarms {dict(actual - expected)}: "
                            + " | ".join(report.lines()))
    assert not problems, "\n".join(problems)


def test_matrix_totals(chart_of, knowledge, capsys):
    """No missed finding, no false alarm, and never a clear report for an unknown drug."""
    missed, false_alarms, by_kind, clear_unknown = Counter(), Counter(), Counter(), []
    high_cells = 0
    for patient, cells in EXPECTED.items():
        chart = chart_of(patient)
        for drug, expected in cells.items():
            report = check_prescription(drug, chart, knowledge)
            actual = above_info(report)
            missed += expected - actual
            false_alarms += actual - expected
            by_kind.update(kind for kind, _sev in actual.elements())
            high_cells += report.blocking
            if drug in UNKNOWN_TO_DATA:
                unknown = [f for f in report.findings if f.kind == "unknown_drug"]
                if not unknown or UNKNOWN_DRUG_TEXT not in unknown[0].text or "no findings" in report.formatted():
                    clear_unknown.append((patient, drug))
    cells_total = len(EXPECTED) * len(DRUGS)
    with capsys.disabled():
        print(f"\nsafety matrix: {len(EXPECTED)} patients x {len(DRUGS)} drugs = {cells_total} cells; "
              f"{sum(by_kind.values())} findings above info ({dict(sorted(by_kind.items()))}); "
              f"{high_cells} cells blocking; missed {sum(missed.values())}, false alarms {sum(false_alarms.values())}")
    assert not missed, dict(missed)
    assert not false_alarms, dict(false_alarms)
    assert not clear_unknown


def test_run_matrix_counts_what_the_tests_above_check(data_home):
    """The selftest's figures come from the same table and find the same: nothing missed, no
    false clear, no false alarm."""
    result = run_matrix(data_home / "ehr.sqlite", data_home / "knowledge.sqlite")
    assert result["cases"] == len(EXPECTED) * len(DRUGS) == 299
    assert (result["missed"], result["false_clear"], result["false_alarms"]) == (0, 0, 0), result["problems"]
