"""An export taken back: imported into a fresh appliance (a second data home) it reproduces the
charts of the patients it carries; importing it twice changes nothing; the importer reports the
sender's Provenance and AuditEvent as not stored."""

from __future__ import annotations

import json

import pytest

from appliance.cli import main
from ehr_db.repository import EhrRepository
from tests.ehr.ehr_helpers import row_counts
from tests.ehr.export_helpers import afternoon, make_home

PATIENTS = ("abc-123", "pat-005")


@pytest.fixture
def sent(appliance_home, tmp_path, capsys):
    """The afternoon's export from the first data home, and that home's record."""
    path = make_home(appliance_home)
    afternoon(path)
    out = tmp_path / "usb" / "export.json"
    out.parent.mkdir()
    assert main(["ehr", "export", str(out)]) == 0
    capsys.readouterr()
    return out, path


@pytest.fixture
def second_home(tmp_path, monkeypatch):
    home = tmp_path / "clinic-b"
    monkeypatch.setenv("APPLIANCE_HOME", str(home))
    return make_home(home)


def imported(capsys, out, *more) -> dict:
    assert main(["ehr", "import", str(out), "--json", *more]) == 0
    return json.loads(capsys.readouterr().out)


def total(counts: dict) -> int:
    """A report's per-table count as printed by --json (a Counter arrives as {"table/n": 1})."""
    return sum(int(key.rsplit("/", 1)[1]) if "/" in key else value for key, value in counts.items())


def test_a_fresh_appliance_gets_the_same_charts(sent, second_home, capsys):
    out, first = sent
    before = {pid: EhrRepository(second_home).get_patient_chart(pid) for pid in PATIENTS}
    # the change and the stop alter active demo orders this fresh record also holds: shown, then accepted
    assert main(["ehr", "import", str(out)]) == 2
    assert "it would change" in capsys.readouterr().out
    report = imported(capsys, out, "--accept-changes")
    assert total(report["created"]) == 5  # 3 new orders, the allergy, the note
    for pid in PATIENTS:
        theirs = EhrRepository(first).get_patient_chart(pid)
        ours = EhrRepository(second_home).get_patient_chart(pid)
        assert ours == theirs
        assert ours != before[pid]  # the afternoon arrived: the comparison is not of two untouched charts
    chart = EhrRepository(second_home).get_patient_chart("abc-123")
    prn = next(m for m in chart["medications"] if m["medication_name"] == "acetaminophen")
    assert (prn["as_needed"], prn["as_needed_for"], prn["max_per_period"]) == (1, "pain", "max 4 g/day")
    assert chart["synthetic_demo_record"] is True
    assert any(n["note_type"] == "telephone" for n in chart["recent_notes"])


def test_importing_the_same_export_twice_changes_nothing(sent, second_home, capsys):
    out, _ = sent
    imported(capsys, out, "--accept-changes")
    counts = row_counts(second_home)
    report = imported(capsys, out)  # nothing differs now: no acceptance needed
    assert total(report["created"]) == 0 and total(report["updated"]) == 0
    assert total(report["unchanged"]) == 9  # 2 patients, 5 orders, the allergy, the note
    assert row_counts(second_home) == counts  # not even an audit row
    reasons = {s["reason"] for s in report["skipped"]}
    assert reasons == {"not stored (the sender's provenance)", "not stored (the sender's audit)"}


def test_a_record_without_those_patients_gets_them_whole(sent, tmp_path):
    """A record that has never held the demo patients (the importer itself; `ehr import` loads them)."""
    from ehr_db.fhir_import import import_fhir_bundle
    from ehr_db.setup import ensure_database

    out, first = sent
    path = tmp_path / "bare.sqlite"
    ensure_database(path, load_demo=False)
    report = import_fhir_bundle(path, out)
    assert report.created["patients"] == 2 and not report.differences
    for pid in PATIENTS:
        ours, theirs = EhrRepository(path).get_patient_chart(pid), EhrRepository(first).get_patient_chart(pid)
        assert ours["patient"] == theirs["patient"] and ours["synthetic_demo_record"] is True
        written = {m["id"]: m for m in theirs["medications"] + theirs["past_medications"]}
        assert ours["medications"] + ours["past_medications"]
        for order in ours["medications"] + ours["past_medications"]:
            assert order == written[order["id"]]
        assert ours["allergies"] == [a for a in theirs["allergies"] if a["substance"] == "latex"]
