"""Order changes on the 'ehr' MCP server (in memory, real fastmcp Client, real SQLite): a new
dose or frequency replaces the order (linked), stop/hold/resume/renew change its status, each
audited with the order it changed; the host's prescription check runs on the new values against
the chart without the order changed; nothing is ever written twice or silently."""

from __future__ import annotations

import json
import sqlite3

import pytest
from ehr_helpers import call, row_counts
from fastmcp.exceptions import ToolError

from mcp_servers.contracts import parse_tool_error
from mcp_servers.ehr import server as ehr
from mcp_servers.ehr.host_gate import PrescriptionRefused

CHANGE, STATUS = "change_medication_order", "update_medication_status"


def orders(path, patient: str, drug: str) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(
            "SELECT * FROM medication_requests WHERE patient_id = ? AND lower(medication_name) LIKE ? "
            "ORDER BY authored_at, id", (patient, f"%{drug}%"))]
    finally:
        conn.close()


def last_audit(path) -> dict:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("SELECT * FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone())
    finally:
        conn.close()


def error(server, tool, args) -> tuple[str, str]:
    with pytest.raises(ToolError) as exc:
        call(server, tool, args)
    return parse_tool_error(str(exc.value))


def change(dosage=None, frequency=None, reason=None, patient="abc-123", drug="metformin", new=None, **hidden):
    return {"patient_id": patient, "medication_name": drug, "new_medication_name": new, "dosage": dosage,
            "frequency": frequency, "reason": reason, **hidden}


def status(action, reason=None, patient="abc-123", drug="metformin", **hidden):
    return {"patient_id": patient, "medication_name": drug, "action": action, "reason": reason, **hidden}


def test_a_new_dose_replaces_the_order_linked_and_audited(server, ehr_path):
    (old,) = [o for o in orders(ehr_path, "abc-123", "metformin") if o["status"] == "active"]
    result = call(server, CHANGE, change("1000 mg", "twice daily", "HbA1c above target"))
    assert result["replaces"] == old["id"] and result["status"] == "active" and result["dosage"] == "1000 mg"
    rows = {o["id"]: o for o in orders(ehr_path, "abc-123", "metformin")}
    new = rows[result["id"]]
    assert (new["status"], new["replaces_id"], new["frequency"], new["rxnorm_code"]) == \
        ("active", old["id"], "twice daily", old["rxnorm_code"])
    assert rows[old["id"]]["status"] == "stopped" and rows[old["id"]]["status_reason"] == "HbA1c above target"
    audit = last_audit(ehr_path)
    assert audit["tool"] == CHANGE and json.loads(audit["arguments"])["order_id"] == old["id"]
    assert json.loads(audit["result"])["replaces"] == old["id"]


def test_a_change_keeps_what_it_does_not_name(server, ehr_path):
    (old,) = [o for o in orders(ehr_path, "abc-123", "amlodipine") if o["status"] == "active"]
    result = call(server, CHANGE, change("10 mg", drug="amlodipine"))
    assert (result["dosage"], result["frequency"]) == ("10 mg", old["frequency"])
    assert error(server, CHANGE, change(drug="amlodipine"))[0] == "invalid_args"  # neither given


def test_hold_resume_stop_and_renew_change_the_status_and_never_add_a_second_active_order(server, ehr_path):
    (first,) = [o for o in orders(ehr_path, "abc-123", "lisinopril") if o["status"] == "active"]
    assert call(server, STATUS, status("hold", "before the CT", drug="lisinopril"))["status"] == "on-hold"
    assert error(server, STATUS, status("hold", drug="lisinopril"))[0] == "not_found"  # held already
    assert call(server, STATUS, status("resume", drug="lisinopril"))["status"] == "active"
    renewed = call(server, STATUS, status("renew", drug="lisinopril"))
    assert renewed["replaces"] == first["id"] and renewed["status"] == "active"
    rows = {o["id"]: o for o in orders(ehr_path, "abc-123", "lisinopril")}
    assert rows[first["id"]]["status"] == "completed"
    assert call(server, STATUS, status("stop", "angioedema", drug="lisinopril"))["status"] == "stopped"
    states = sorted(o["status"] for o in orders(ehr_path, "abc-123", "lisinopril"))
    assert states == ["completed", "stopped"]
    assert error(server, STATUS, status("resume", drug="lisinopril"))[0] == "not_found"


def test_an_order_not_on_the_chart_or_two_alike_is_refused_and_nothing_is_written(server, ehr_path):
    before = row_counts(ehr_path)
    kind, text = error(server, STATUS, status("stop", drug="warfarin"))  # abc-123 takes none
    assert kind == "not_found" and "'warfarin'" in text and "not changed" in text
    call(server, "prescribe_medication", {"patient_id": "abc-123", "medication_name": "metformin", "dosage": "500 mg",
                                          "frequency": "once daily", "notes": None})
    counted = row_counts(ehr_path)
    kind, text = error(server, CHANGE, change("1000 mg", "bid"))
    assert kind == "ambiguous_drug_name" and "2 orders of 'metformin'" in text
    assert row_counts(ehr_path) == counted and counted["medication_requests"] == before["medication_requests"] + 1


def test_a_repeated_key_changes_the_order_once(server, ehr_path):
    first = call(server, CHANGE, change("850 mg", "bid", idempotency_key="change-key-0001"))
    again = call(server, CHANGE, change("850 mg", "bid", idempotency_key="change-key-0001"))
    assert again["id"] == first["id"]
    assert len([o for o in orders(ehr_path, "abc-123", "metformin") if o["status"] == "active"]) == 1


def test_the_sig_is_kept_beside_the_words(server, ehr_path):
    sig = {"as_needed": True, "as_needed_for": "pain", "max_per_period": "max 4 g/day", "duration": None,
           "quantity": "#30", "refills": 0,
           "dosage_instruction": {"text": "1 g q6h prn pain, max 4 g/day", "asNeededCodeableConcept": {"text": "pain"}},
           "dispense_request": {"quantity": {"value": 30}, "numberOfRepeatsAllowed": 0}}
    new_id = call(server, "prescribe_medication", {
        "patient_id": "pat-006", "medication_name": "acetaminophen", "dosage": "1 g",
        "frequency": "q6h prn pain, max 4 g/day", "notes": None, "sig": sig})["id"]
    (row,) = [o for o in orders(ehr_path, "pat-006", "acetaminophen") if o["id"] == new_id]
    assert (row["as_needed"], row["as_needed_for"], row["max_per_period"], row["quantity"], row["refills"]) == \
        (1, "pain", "max 4 g/day", "#30", 0)
    assert json.loads(row["dosage_instruction"]) == sig["dosage_instruction"]
    chart = call(server, "get_patient_chart", {"patient_id": "pat-006"})
    (charted,) = [m for m in chart["medications"] if m["id"] == new_id]
    assert charted["as_needed"] == 1 and charted["frequency"] == "q6h prn pain, max 4 g/day"


@pytest.fixture
def checked(server):
    seen: list[tuple[dict, dict]] = []

    def check(prescription, chart, approval, reauthentication=None):
        seen.append((prescription, chart))
        if prescription["dosage"] == "3000 mg":
            raise PrescriptionRefused("above the maximum daily dose", {"findings": []})
        return {"decision": "approval", "safety": {"findings": []}}

    ehr.set_prescription_check(check)
    yield seen
    ehr.set_prescription_check(None)


def test_the_hosts_check_sees_the_new_values_without_the_order_changed(server, ehr_path, checked):
    (old,) = [o for o in orders(ehr_path, "abc-123", "metformin") if o["status"] == "active"]
    call(server, CHANGE, change("1000 mg", None))
    ((prescription, chart),) = checked
    assert prescription == {"patient_id": "abc-123", "medication_name": old["medication_name"], "dosage": "1000 mg",
                            "frequency": old["frequency"]}
    assert old["id"] not in [m["id"] for m in chart["medications"]]
    call(server, STATUS, status("hold"))  # taking a drug away checks nothing
    assert len(checked) == 1
    call(server, STATUS, status("resume"))
    assert len(checked) == 2


def test_a_change_the_hosts_check_refuses_is_not_written_and_is_recorded(server, ehr_path, checked):
    before = row_counts(ehr_path)
    kind, text = error(server, CHANGE, change("3000 mg", "daily"))
    assert kind == "rejected_by_user" and "above the maximum daily dose" in text
    after = row_counts(ehr_path)
    assert after["medication_requests"] == before["medication_requests"]
    assert after["audit_log"] == before["audit_log"] + 1
    event = last_audit(ehr_path)
    assert event["tool"] == "rejection" and json.loads(event["arguments"])["details"]["tool"] == CHANGE


def test_a_switch_on_the_server_is_one_write_checked_as_the_new_drug(server, ehr_path, checked):
    (old,) = [o for o in orders(ehr_path, "abc-123", "lisinopril") if o["status"] == "active"]
    result = call(server, CHANGE, change("50 mg", "once daily", "cough", drug="lisinopril", new="losartan"))
    ((prescription, chart),) = checked
    assert prescription == {"patient_id": "abc-123", "medication_name": "losartan", "dosage": "50 mg",
                            "frequency": "once daily"}  # the new drug with its own values
    assert old["id"] not in [m["id"] for m in chart["medications"]]  # against the chart without the old order
    assert (result["medication_name"], result["replaces"]) == ("losartan", old["id"])
    (stopped,) = [o for o in orders(ehr_path, "abc-123", "lisinopril") if o["id"] == old["id"]]
    assert (stopped["status"], stopped["status_reason"]) == ("stopped", "switched to losartan: cough")
    assert [o["replaces_id"] for o in orders(ehr_path, "abc-123", "losartan") if o["status"] == "active"] == [old["id"]]
    audit = last_audit(ehr_path)
    assert json.loads(audit["arguments"])["new_medication_name"] == "losartan"
    before = row_counts(ehr_path)
    kind, _ = error(server, CHANGE, change(None, None, drug="losartan", new="lisinopril"))  # no dose for the new drug
    assert kind == "invalid_args" and row_counts(ehr_path) == before
