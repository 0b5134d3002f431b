"""What the record keeps of an approval, an override and a rejection: TOOL_EXECUTE with
the medication safety gate and the headless approver, against the real EHR and knowledge MCP
servers in this process (fastmcp's in-memory transport) on real SQLite files."""

from __future__ import annotations

import json
import sqlite3

import pytest

from appliance.agent.nodes.tool_execute import execute
from appliance.safety.chart_gate import ChartSafetyGate
from appliance.safety.headless import HeadlessApprover
from appliance.tools.base import Approval, ToolOutcome, approve_all, deny_all, signed_by
from appliance.tools.in_process import InProcessToolBox
from appliance.tools.scripted import ScriptedToolBox
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database as ensure_ehr
from mcp_servers.ehr import server as ehr
from mcp_servers.knowledge import server as knowledge
from mcp_servers.knowledge.store import ensure_database as ensure_knowledge

DEADLINE = 30.0
REASON = "tolerated amoxicillin since 2020, allergy delabelled"
AMOXICILLIN = {"patient_id": "pat-006", "medication_name": "amoxicillin", "dosage": "500 mg",  # penicillin allergy
               "frequency": "three times daily", "notes": None}
# Known to the local drug data, its dose within the label's, eGFR 42: a moderate renal finding only.
APIXABAN = {"patient_id": "abc-123", "medication_name": "apixaban", "dosage": "5 mg",
            "frequency": "twice daily", "notes": None}


@pytest.fixture(scope="module")
def knowledge_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("knowledge") / "knowledge.sqlite"
    ensure_knowledge(path)
    return path


@pytest.fixture
def ehr_db(tmp_path, knowledge_db):
    path = tmp_path / "ehr.sqlite"
    ensure_ehr(path)
    ehr.configure(path)
    knowledge.configure(knowledge_db)
    yield path
    ehr.configure(None)
    knowledge.configure(None)


@pytest.fixture
def tools(ehr_db):
    with InProcessToolBox() as box:
        yield box


def prescribe(tools, args: dict, approver) -> object:
    return execute("prescribe_medication", dict(args), tools, approver, DEADLINE,
                   safety_gate=ChartSafetyGate(tools, DEADLINE))


def trail(path, patient: str) -> list[dict]:
    """The patient's audit rows, with arguments and result read back from JSON."""
    return [{**r, "arguments": json.loads(r["arguments"]), "result": json.loads(r["result"] or "null")}
            for r in EhrRepository(path).audit_trail(patient)]


def orders(path, patient: str, drug: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM medication_requests WHERE patient_id = ? AND medication_name = ?",
                            (patient, drug)).fetchone()[0]
    finally:
        conn.close()


def test_an_approved_prescription_keeps_its_findings_and_the_decision_in_its_audit_row(tools, ehr_db):
    result = prescribe(tools, APIXABAN, signed_by(HeadlessApprover(), "dr.a"))
    assert result.error_type is None
    (row,) = trail(ehr_db, "abc-123")
    assert row["tool"] == "prescribe_medication" and row["result"]["id"] == result.result["id"]
    approval = row["result"]["approval"]
    assert (approval["decision"], approval["clinician"]) == ("approval", "dr.a")
    assert approval["safety"]["blocking"] is False and approval["safety"]["override_reason"] is None
    assert ("renal", "moderate") in {(f["kind"], f["severity"]) for f in approval["safety"]["findings"]}
    assert result.safety == approval["safety"]  # the trace shows what the record keeps
    assert EhrRepository(ehr_db).verify_audit().ok


def test_an_overridden_blocking_prescription_keeps_the_reason_and_the_override(tools, ehr_db):
    result = prescribe(tools, AMOXICILLIN, signed_by(HeadlessApprover(REASON), "dr.b"))
    assert result.error_type is None and orders(ehr_db, "pat-006", "amoxicillin") == 1
    (row,) = trail(ehr_db, "pat-006")
    approval = row["result"]["approval"]
    assert (approval["decision"], approval["clinician"]) == ("override", "dr.b")
    assert approval["safety"]["blocking"] is True and approval["safety"]["override_reason"] == REASON
    assert approval["safety"]["findings"][0]["kind"] == "allergy"
    assert approval["safety"]["findings"][0]["evidence"]["allergy"]["substance"] == "Penicillin"
    assert EhrRepository(ehr_db).verify_audit().ok


def test_a_refused_prescription_writes_nothing_and_records_one_rejection_with_its_findings(tools, ehr_db):
    result = prescribe(tools, AMOXICILLIN, signed_by(HeadlessApprover(), "dr.b"))
    assert result.error_type == "rejected_by_user" and orders(ehr_db, "pat-006", "amoxicillin") == 0
    (row,) = trail(ehr_db, "pat-006")
    assert (row["tool"], row["result"]) == ("rejection", None)
    details = row["arguments"]["details"]
    assert (details["tool"], details["clinician"]) == ("prescribe_medication", "dr.b")
    assert "refused" in details["reason"] and "--override-safety" in details["reason"]
    assert details["safety"]["blocking"] is True and details["safety"]["override_reason"] is None
    assert details["safety"]["findings"][0]["kind"] == "allergy"
    assert EhrRepository(ehr_db).verify_audit().ok


def test_a_write_without_a_safety_check_records_its_rejection_without_findings(tools, ehr_db):
    args = {"patient_id": "abc-123", "substance": "latex", "reaction": "rash", "severity": None}
    result = execute("add_allergy", args, tools, deny_all, DEADLINE)
    assert result.error_type == "rejected_by_user"
    (row,) = trail(ehr_db, "abc-123")
    assert row["tool"] == "rejection" and row["arguments"]["details"] == {
        "tool": "add_allergy", "clinician": None, "reason": "writes are not enabled for this run", "safety": None,
        "recorded_by": "terminal"}


class Unrecorded:
    """The real tool box, except that recording an audit event fails: ``how`` says how."""

    def __init__(self, tools, how: str):
        self._tools, self._how = tools, how

    def call(self, tool, args, deadline, **hidden):
        return self._tools.call(tool, args, deadline, **hidden)

    def record_event(self, kind, patient_id, details, deadline):
        if self._how == "raises":
            raise RuntimeError("the record went away")
        return ToolOutcome(error_type="service_unavailable", message="busy")

    def drug_names(self):
        return []


@pytest.mark.parametrize("how", ["raises", "refused"])
def test_a_rejection_stands_when_it_cannot_be_recorded(tools, ehr_db, how):
    result = prescribe(Unrecorded(tools, how), AMOXICILLIN, signed_by(HeadlessApprover(), "dr.b"))
    assert result.error_type == "rejected_by_user" and "refused" in result.error
    assert orders(ehr_db, "pat-006", "amoxicillin") == 0 and trail(ehr_db, "pat-006") == []


def test_the_scripted_tool_box_keeps_approvals_and_events_apart_from_the_calls():
    args = {"patient_id": "abc-123", "note_type": "progress", "note_text": "Stable."}
    box = ScriptedToolBox({"save_clinical_note": [{"result": {"id": "n1"}}]}, fallback=None)
    assert execute("save_clinical_note", dict(args), box, signed_by(approve_all, "dr.a"), DEADLINE).error_type is None
    assert execute("save_clinical_note", dict(args), box, deny_all, DEADLINE).error_type == "rejected_by_user"
    assert box.calls == [("save_clinical_note", args)]
    assert box.approvals == [{"decision": "approval", "clinician": "dr.a", "safety": None}]
    assert box.audit_events == [("rejection", "abc-123", {
        "tool": "save_clinical_note", "clinician": None, "reason": "writes are not enabled for this run",
        "safety": None})]


def test_a_dose_edited_in_the_approval_is_checked_again_before_anything_is_written(ehr_db, tools):
    """The dialog's fields are editable: a 10x dose typed there is checked as typed and shown
    again; the plain approval of the first report does not carry over to it."""
    shown = []

    def approver(tool, args, safety=None):
        shown.append((args["dosage"], safety))
        if len(shown) == 1:
            return Approval(True, {**args, "dosage": "50 mg"})  # 5 mg -> 50 mg in the dialog
        return Approval(False, args, "not what I meant")

    result = prescribe(tools, APIXABAN, approver)
    assert [dose for dose, _ in shown] == ["5 mg", "50 mg"]
    first, second = shown[0][1], shown[1][1]
    assert not first.needs_override and second.needs_override  # the typed dose is over the label's
    assert any("50" in f.text for f in second.findings)
    assert result.error_type == "rejected_by_user" and orders(ehr_db, "abc-123", "apixaban") == 0


def test_an_edit_the_check_finds_nothing_new_in_is_written_on_the_first_approval(ehr_db, tools):
    shown = []

    def approver(tool, args, safety=None):
        shown.append(args)
        return Approval(True, {**args, "notes": "take with food"})

    result = prescribe(tools, APIXABAN, approver)
    assert len(shown) == 1 and result.error_type is None
    assert orders(ehr_db, "abc-123", "apixaban") == 1
