"""A switch on the record (``order_changes.change_order`` with ``new_medication_name``): the old
order stopped "switched to <drug>", the new drug's order written active and linked to it, in one
transaction with one audit row; never two active orders, never the old dose on the new drug.
Real SQLite (the demo record in a temporary file)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from ehr_db import order_changes
from ehr_db.errors import InvalidField, OrderNotFound

CHANGE = order_changes.TOOL_CHANGE


def _rows(path, sql: str, args=()) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def _active(path, patient: str) -> list[dict]:
    return _rows(path, "SELECT * FROM medication_requests WHERE patient_id = ? AND status = 'active'", [patient])


def _switch(repo, **kw):
    args = {"dosage": "50 mg", "frequency": "once daily", "reason": None, "new_medication_name": "losartan"}
    args.update(kw)
    return order_changes.change_order(repo, CHANGE, "abc-123", "lisinopril", "change", author="dr-test", **args)


def test_a_switch_stops_the_old_order_and_writes_the_new_drug_linked(repo, ehr_path):
    (old,) = [o for o in _active(ehr_path, "abc-123") if o["medication_name"] == "Lisinopril"]
    audits = len(_rows(ehr_path, "SELECT seq FROM audit_log"))
    result = _switch(repo, reason="dry cough")
    assert (result["medication_name"], result["dosage"], result["frequency"], result["replaces"]) == \
        ("losartan", "50 mg", "once daily", old["id"])
    (closed,) = _rows(ehr_path, "SELECT * FROM medication_requests WHERE id = ?", [old["id"]])
    assert (closed["status"], closed["status_reason"], closed["status_changed_by"]) == \
        ("stopped", "switched to losartan: dry cough", "dr-test")
    assert (closed["dosage"], closed["frequency"]) == (old["dosage"], old["frequency"])  # kept as written
    (new,) = _rows(ehr_path, "SELECT * FROM medication_requests WHERE id = ?", [result["id"]])
    assert (new["status"], new["replaces_id"], new["rxnorm_code"], new["notes"]) == ("active", old["id"], "52175", None)
    names = sorted(o["medication_name"].lower() for o in _active(ehr_path, "abc-123"))
    assert "lisinopril" not in names and names.count("losartan") == 1
    audit = _rows(ehr_path, "SELECT * FROM audit_log ORDER BY seq")
    assert len(audit) == audits + 1  # one write, one row
    arguments, outcome = json.loads(audit[-1]["arguments"]), json.loads(audit[-1]["result"])
    assert (arguments["order_id"], arguments["new_medication_name"], outcome["id"], outcome["replaces"]) == \
        (old["id"], "losartan", result["id"], old["id"])


def test_a_switch_without_a_reason_says_what_it_was_switched_to(repo, ehr_path):
    (old,) = [o for o in _active(ehr_path, "abc-123") if o["medication_name"] == "Lisinopril"]
    _switch(repo)
    (closed,) = _rows(ehr_path, "SELECT status_reason FROM medication_requests WHERE id = ?", [old["id"]])
    assert closed["status_reason"] == "switched to losartan"


@pytest.mark.parametrize("kw, field", [
    ({"dosage": None}, "dosage"),  # the old drug's dose is never carried to the new one
    ({"frequency": None}, "dosage"),
    ({"new_medication_name": "  "}, "new_medication_name"),
])
def test_a_switch_needs_the_new_drugs_dose_and_frequency_and_writes_nothing_without(repo, ehr_path, kw, field):
    before = _rows(ehr_path, "SELECT * FROM medication_requests ORDER BY id")
    audits = _rows(ehr_path, "SELECT seq FROM audit_log")
    with pytest.raises(InvalidField) as exc:
        _switch(repo, **kw)
    assert exc.value.field == field
    assert _rows(ehr_path, "SELECT * FROM medication_requests ORDER BY id") == before
    assert _rows(ehr_path, "SELECT seq FROM audit_log") == audits


def test_only_a_change_switches_and_an_order_not_on_the_chart_is_not_found(repo, ehr_path):
    with pytest.raises(InvalidField):
        order_changes.change_order(repo, order_changes.TOOL_STATUS, "abc-123", "lisinopril", "stop",
                                   author="dr-test", new_medication_name="losartan")
    with pytest.raises(OrderNotFound):
        order_changes.change_order(repo, CHANGE, "abc-123", "warfarin", "change", author="dr-test",
                                   dosage="50 mg", frequency="daily", new_medication_name="losartan")
