"""The tamper suite (``appliance.selftest.tamper``, run by `appliance selftest`): every case but the
documented one (every copy rolled back together) is detected, and it writes only in its folder."""

from __future__ import annotations

from appliance.selftest.tamper import run_tamper_suite, summary
from ehr_db.custody import TABLES


def test_every_case_but_the_documented_one_is_detected(tmp_path):
    report = run_tamper_suite(tmp_path, flips=12)
    rows, rollbacks = 3 * len(TABLES), 7
    assert report["cases"] == rows + rollbacks + 12
    assert report["undetected"] == []
    assert report["documented"] == ["rollback:whole-data-home-no-later-backup"]
    assert report["cases"] == report["detected"] + report["documented_undetectable"] == report["detected"] + 1
    assert summary(report).startswith(f"{rows + rollbacks + 12} tamper cases, {rows + rollbacks + 11} detected, "
                                      "0 undetected, 1 documented as undetectable")
    assert list(tmp_path.iterdir()) == []  # its data home, copies and backups are gone


def test_an_undetected_case_is_named(tmp_path, monkeypatch):
    from appliance.selftest import tamper

    monkeypatch.setattr(tamper, "_caught", lambda home, backups=(): "rows-patients-edit" not in str(home))
    report = run_tamper_suite(tmp_path, flips=0)
    assert report["undetected"] == ["rows:patients:edit"]
    assert "UNDETECTED: rows:patients:edit" in summary(report)
