"""Order changes end to end: the clinician's words, code's call, the safety gate on the new
values, the approval, the real record (in-process MCP servers over real SQLite) and the audit
trail. The model is scripted and says nothing about the order: code reads it."""

from __future__ import annotations

import importlib
import json
import sqlite3

import pytest

from appliance.agent.graph import Agent
from appliance.cli import main
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.setup.home import init_home
from appliance.tools.base import Approval
from appliance.tools.mcp_client import MCPToolBox
from common import locations
from ehr_db.repository import EhrRepository

pytestmark = pytest.mark.timeout(120)
SERVER_DBS = {"ehr": locations.ehr_db_path, "umls": locations.umls_db_path, "knowledge": locations.knowledge_db_path}
IC, TS, RC, SY = "INTENT_CLASSIFY", "TOOL_SELECT", "RESULT_CLASSIFY", "SYNTHESIZE"


class InProcessToolBox(MCPToolBox):
    """The MCP tool box with each server's FastMCP object in this process."""

    def _make_client(self, server: str):
        from fastmcp import Client

        return Client(importlib.import_module(f"mcp_servers.{server}.server").mcp, timeout=30)


@pytest.fixture
def home(appliance_home):
    init_home(progress=lambda message: None, with_model=False)
    for server, path in SERVER_DBS.items():
        importlib.import_module(f"mcp_servers.{server}.server").configure(path())
    yield appliance_home
    for server in SERVER_DBS:
        importlib.import_module(f"mcp_servers.{server}.server").configure(None)


class Clinician:
    """Approves every write as an override with a reason (the gate's findings were read), and
    keeps what the dialog showed."""

    def __init__(self):
        self.seen: list[tuple[str, dict, object]] = []

    def __call__(self, tool, args, safety=None):
        self.seen.append((tool, dict(args), safety))
        return Approval(True, dict(args), override_reason="renal function reviewed, dose agreed with nephrology",
                        reauthenticated=None)


def _script(tool: str) -> dict:
    return {IC: [{"intent": "TOOL_NEEDED", "task_summary": "Change a medication order.", "suggested_tool": tool}],
            TS: [], RC: [{"quality": "success_rich", "brief_summary": "Order changed."}], SY: ["Done."]}


def _orders(patient: str, drug: str) -> list[dict]:
    conn = sqlite3.connect(f"file:{locations.ehr_db_path()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(
            "SELECT * FROM medication_requests WHERE patient_id = ? AND lower(medication_name) LIKE ? "
            "ORDER BY authored_at", (patient, f"%{drug}%"))]
    finally:
        conn.close()


def _turn(query: str, patient: str, tool: str, clinician: Clinician):
    model = ScriptedModel(_script(tool))
    tools = InProcessToolBox()
    try:
        result = Agent(model, tools, Settings(), clinician).run_turn(query, patient_id=patient)
    finally:
        tools.close()
    assert "TOOL_SELECT" in result.path and TS not in [h.node for h in model.history]  # code read the change
    return result


def test_increase_metformin_replaces_the_active_order_after_approval_with_the_renal_finding(home):
    before = [o for o in _orders("abc-123", "metformin") if o["status"] == "active"]
    assert len(before) == 1
    clinician = Clinician()
    result = _turn("increase metformin to 1000 bid", "abc-123", "change_medication_order", clinician)
    tool, args, report = clinician.seen[0]
    assert tool == "change_medication_order"
    assert args == {"patient_id": "abc-123", "medication_name": "metformin", "new_medication_name": None,
                    "dosage": "1000 mg", "frequency": "bid", "reason": None}
    # eGFR 42: the renal finding, on the new order's 2,000 mg a day (above the band's 1,000 mg cap)
    (renal,) = [f for f in report.findings if f.kind == "renal"]
    assert renal.severity == "high" and "eGFR 42" in renal.text and "2,000 mg a day" in renal.text, renal
    assert report.checked["dose"] and not [f for f in report.findings if f.kind == "dose"]
    assert not [f for f in report.findings if f.kind == "duplicate"]  # the order is not its own duplicate
    assert result.tool_calls[-1]["error_type"] is None
    after = _orders("abc-123", "metformin")
    active = [o for o in after if o["status"] == "active"]
    assert len(active) == 1 and active[0]["dosage"] == "1000 mg" and active[0]["frequency"] == "bid"
    assert active[0]["replaces_id"] == before[0]["id"]  # linked to the order it replaced
    old = next(o for o in after if o["id"] == before[0]["id"])
    assert old["status"] == "stopped" and old["status_reason"] == "replaced" and old["status_changed_by"]
    structured = json.loads(active[0]["dosage_instruction"])
    assert structured["doseAndRate"][0]["doseQuantity"]["value"] == 1000
    assert structured["timing"]["repeat"] == {"frequency": 2, "period": 1, "periodUnit": "d"}


def test_stop_the_warfarin_discontinues_it_and_audit_show_lists_both_changes(home, capsys):
    clinician = Clinician()
    _turn("increase metformin to 1000 bid", "abc-123", "change_medication_order", clinician)
    before = [o for o in _orders("pat-005", "warfarin") if o["status"] == "active"]
    assert len(before) == 1
    result = _turn("stop the warfarin", "pat-005", "update_medication_status", clinician)
    tool, args, report = clinician.seen[-1]
    assert (tool, args, report) == ("update_medication_status", {"patient_id": "pat-005", "medication_name": "warfarin",
                                                                 "action": "stop", "reason": None}, None)
    assert result.tool_calls[-1]["error_type"] is None
    (order,) = [o for o in _orders("pat-005", "warfarin") if o["id"] == before[0]["id"]]
    assert order["status"] == "stopped"
    assert not [o for o in _orders("pat-005", "warfarin") if o["status"] == "active"]  # no second order
    chart = EhrRepository(locations.ehr_db_path()).get_patient_chart("pat-005")
    assert "warfarin" not in [m["medication_name"].lower() for m in chart["medications"]]
    assert [m["status"] for m in chart["past_medications"] if "warfarin" in m["medication_name"].lower()] == ["stopped"]
    for patient, tool, changed in (("abc-123", "change_medication_order", None),
                                   ("pat-005", "update_medication_status", before[0]["id"])):
        assert main(["audit", "show", "--patient", patient, "--json"]) == 0
        rows = [r for r in json.loads(capsys.readouterr().out)["rows"] if r["tool"] == tool]
        assert len(rows) == 1
        arguments, outcome = json.loads(rows[0]["arguments"]), json.loads(rows[0]["result"])
        assert arguments["order_id"] and (changed is None or arguments["order_id"] == changed)
        if tool == "change_medication_order":
            assert outcome["replaces"] == arguments["order_id"] and outcome["id"] != arguments["order_id"]
        else:
            assert outcome["id"] == arguments["order_id"] and arguments["action"] == "stop"
        assert main(["audit", "show", "--patient", patient]) == 0
        text = capsys.readouterr().out
        assert tool in text and arguments["order_id"] in text


def test_an_increase_is_checked_as_the_new_dose_and_a_rejection_changes_nothing(home):
    def reject(tool, args, safety=None):
        seen.append(safety)
        return Approval(False, dict(args), "too high")

    seen: list = []
    before = _orders("abc-123", "metformin")
    model = ScriptedModel({**_script("change_medication_order"),
                           RC: [{"quality": "error_fatal", "brief_summary": "Not approved."}]})
    tools = InProcessToolBox()
    try:
        result = Agent(model, tools, Settings(), reject).run_turn("increase metformin to 2000 bid", patient_id="abc-123")
    finally:
        tools.close()
    (report,) = seen
    dose = [f for f in report.findings if f.kind == "dose"]
    assert dose and ("4,000" in dose[0].text or "4000" in dose[0].text), report.findings  # 2,000 mg twice a day
    assert result.tool_calls[-1]["error_type"] == "rejected_by_user"
    assert _orders("abc-123", "metformin") == before  # nothing changed


def test_an_as_needed_order_is_charted_and_exported_as_needed_with_its_maximum(home, tmp_path, capsys):
    clinician = Clinician()
    result = _turn("rx acetaminophen 500 mg q6h prn pain, max 3 g/day", "pat-006", "prescribe_medication", clinician)
    assert result.tool_calls[-1]["error_type"] is None
    (row,) = [o for o in _orders("pat-006", "acetaminophen") if o["status"] == "active"]
    assert (row["frequency"], row["as_needed"], row["as_needed_for"], row["max_per_period"]) == \
        ("q6h prn pain, max 3 g/day", 1, "pain", "max 3 g/day")
    dosage = json.loads(row["dosage_instruction"])
    assert dosage["asNeededCodeableConcept"] == {"text": "pain"}
    assert dosage["maxDosePerPeriod"]["numerator"] == {"value": 3.0, "unit": "g", "system": "http://unitsofmeasure.org",
                                                       "code": "g"}
    assert dosage["timing"]["repeat"] == {"frequency": 1, "period": 6.0, "periodUnit": "h"}
    chart = EhrRepository(locations.ehr_db_path()).get_patient_chart("pat-006")
    assert [m["frequency"] for m in chart["medications"] if m["id"] == row["id"]] == ["q6h prn pain, max 3 g/day"]
    out = tmp_path / "export.json"
    assert main(["ehr", "export", str(out), "--patient", "pat-006"]) == 0  # the signed FHIR bundle
    capsys.readouterr()
    (exported,) = [e["resource"] for e in json.loads(out.read_text(encoding="utf-8"))["entry"]
                   if e["resource"].get("id") == row["id"]]
    (sig,) = exported["dosageInstruction"]
    assert exported["resourceType"] == "MedicationRequest" and sig["asNeededCodeableConcept"] == {"text": "pain"}
    assert sig["maxDosePerPeriod"]["numerator"]["value"] == 3.0 and sig["maxDosePerPeriod"]["numerator"]["unit"] == "g"
    assert sig["text"].startswith("500 mg q6h prn pain, max 3 g/day"), sig["text"]


def test_the_gate_checks_an_as_needed_order_against_its_maximum(home):
    reports = {}
    for query in ("rx acetaminophen 1 g q4h prn pain", "rx acetaminophen 1 g q4h prn pain, max 3 g/day"):
        seen: list = []

        def reject(tool, args, safety=None, seen=seen):
            seen.append((args, safety))
            return Approval(False, dict(args), "checking the gate only")

        model = ScriptedModel({**_script("prescribe_medication"),
                               RC: [{"quality": "error_fatal", "brief_summary": "Not approved."}]})
        tools = InProcessToolBox()
        try:
            Agent(model, tools, Settings(), reject).run_turn(query, patient_id="pat-006")
        finally:
            tools.close()
        ((args, report),) = seen
        reports[args["frequency"]] = [f for f in report.findings if f.kind == "dose"]
    assert reports["q4h prn pain"]  # six a day allowed: 6 g, above the daily limit
    assert reports["q4h prn pain, max 3 g/day"] == []  # the written maximum bounds the day at 3 g
