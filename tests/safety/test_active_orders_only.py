"""The safety gate counts only active orders (issue 37): a held or stopped order on the real
record is listed on the chart but is neither an interaction nor a duplicate; an active one is
both. Real SQLite (the demo EHR, changed with the record's own order changes) and the real
knowledge store."""

from __future__ import annotations

import pytest

from appliance.safety import check_prescription
from ehr_db import order_changes
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def repo(tmp_path) -> EhrRepository:
    path = tmp_path / "ehr.sqlite"
    ensure_database(path)
    return EhrRepository(path)


def _set_warfarin(repo: EhrRepository, action: str) -> None:
    order_changes.change_order(repo, order_changes.TOOL_STATUS, "pat-005", "warfarin", action,
                               author="dr-test", reason="before the procedure")


def _warfarin_findings(report, kind: str) -> list:
    return [f for f in report.findings if f.kind == kind and "warfarin" in f.text.lower()]


def test_active_warfarin_is_an_ibuprofen_interaction_and_a_held_one_is_not(repo, knowledge):
    before = check_prescription("ibuprofen", repo.get_patient_chart("pat-005"), knowledge,
                                dosage="400 mg", frequency="every 8 hours")
    assert _warfarin_findings(before, "interaction"), before.findings
    _set_warfarin(repo, "hold")
    chart = repo.get_patient_chart("pat-005")
    assert [m["status"] for m in chart["medications"] if m["medication_name"] == "Warfarin"] == ["on-hold"]
    after = check_prescription("ibuprofen", chart, knowledge, dosage="400 mg", frequency="every 8 hours")
    assert not _warfarin_findings(after, "interaction"), after.findings
    assert after.checked["interactions"]  # the other active orders were still checked


def test_a_stopped_order_is_no_duplicate_and_an_active_one_is(repo, knowledge):
    active = check_prescription("warfarin", repo.get_patient_chart("pat-005"), knowledge,
                                dosage="5 mg", frequency="once daily")
    assert [(f.kind, f.severity) for f in _warfarin_findings(active, "duplicate")] == [("duplicate", "high")]
    _set_warfarin(repo, "stop")
    stopped = check_prescription("warfarin", repo.get_patient_chart("pat-005"), knowledge,
                                 dosage="5 mg", frequency="once daily")
    assert not [f for f in stopped.findings if f.kind == "duplicate"], stopped.findings


def test_a_held_order_is_no_duplicate(repo, knowledge):
    _set_warfarin(repo, "hold")
    report = check_prescription("warfarin", repo.get_patient_chart("pat-005"), knowledge,
                                dosage="5 mg", frequency="once daily")
    assert not [f for f in report.findings if f.kind == "duplicate"], report.findings


def test_resuming_a_held_warfarin_is_checked_against_the_ibuprofen_started_meanwhile(repo, knowledge):
    """Why a held order may not count: the pair is caught when it would be taken together."""
    _set_warfarin(repo, "hold")
    repo.prescribe_medication("pat-005", "ibuprofen", "400 mg", "every 8 hours", author="dr-test")
    chart = repo.get_patient_chart("pat-005")
    (held,) = [m for m in chart["medications"] if m["medication_name"] == "Warfarin"]
    resumed = check_prescription("Warfarin", chart, knowledge, dosage=held["dosage"], frequency=held["frequency"])
    found = [f for f in resumed.findings if f.kind == "interaction" and "ibuprofen" in f.text.lower()]
    assert found and found[0].severity == "high", resumed.findings
