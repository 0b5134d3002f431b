"""Write approval against the real EHR: the 'ehr' MCP server (and the other two) run in this
process through fastmcp's in-memory transport, behind the app's own MCP tool box, on a data
home built by ``appliance init``; the model is scripted. For each write tool and each decision
(Approve, Reject, Escape) the record is queried before and after."""

from __future__ import annotations

import importlib
import json
import sqlite3

import pytest
from textual.widgets import Input

from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from appliance.setup.home import init_home
from appliance.tools.mcp_client import MCPToolBox
from common import locations
from ehr_db.repository import EhrRepository
from tests.tui.helpers import (
    IC,
    SIZE,
    TS,
    ask,
    good,
    intent,
    ready,
    settle,
    wait_until,
)
from tui.app import ClinicApp
from tui.screens.approval import ApprovalScreen

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
SERVER_DBS = {"ehr": locations.ehr_db_path, "umls": locations.umls_db_path, "knowledge": locations.knowledge_db_path}
PATIENT = "abc-123"  # John Smith: metformin, amlodipine, lisinopril, atorvastatin; sulfamethoxazole allergy

# tool -> (question, arguments, SQL counting the written row, what the chart panel shows after)
WRITES = {
    "prescribe_medication": (
        f"Prescribe empagliflozin 10 mg once daily for {PATIENT}",
        {"patient_id": PATIENT, "medication_name": "empagliflozin", "dosage": "10 mg",
         "frequency": "once daily", "notes": None},
        "SELECT count(*) FROM medication_requests WHERE patient_id = ? AND medication_name = 'empagliflozin'"
        " AND dosage = '10 mg' AND frequency = 'once daily' AND status = 'active'",
        "empagliflozin 10 mg once daily",
    ),
    "add_allergy": (
        f"Document a penicillin allergy with hives for {PATIENT}",
        {"patient_id": PATIENT, "substance": "penicillin", "reaction": "hives", "severity": "moderate"},
        "SELECT count(*) FROM allergy_intolerances WHERE patient_id = ? AND substance = 'penicillin'"
        " AND reaction = 'hives' AND severity = 'moderate'",
        "penicillin (hives, moderate)",
    ),
    "save_clinical_note": (
        f"Write a progress note for {PATIENT}: stable, review in 3 months",
        {"patient_id": PATIENT, "note_type": "progress", "note_text": "Stable on current plan. Review in 3 months."},
        "SELECT count(*) FROM document_references WHERE patient_id = ? AND note_type = 'progress'"
        " AND text = 'Stable on current plan. Review in 3 months.'",
        "Stable on current plan. Review in 3 months.",
    ),
}


class InProcessToolBox(MCPToolBox):
    """The app's MCP tool box with each server's FastMCP object in this process instead of a
    stdio subprocess; calls, results, errors and health go through the same code."""

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


def rows(sql: str) -> int:
    conn = sqlite3.connect(f"file:{locations.ehr_db_path()}?mode=ro", uri=True)
    try:
        return conn.execute(sql, (PATIENT,)).fetchone()[0]
    finally:
        conn.close()


def script(tool: str, approved: bool) -> dict:
    # A prescription whose words give the whole order is code's call (appliance.agent.order_calls): no
    # model. The result's label and the answer are code's (appliance.agent.code_answers).
    select = [] if tool == "prescribe_medication" else [{"tool_name": tool}, dict(WRITES[tool][1])]
    return {IC: [intent(tool)], TS: select}


def panel(app) -> str:
    return str(app.main.patient.query_one("#patient-body").render())


@pytest.mark.parametrize("tool", list(WRITES))
@pytest.mark.parametrize("decision", ["approve", "reject", "escape"])
async def test_a_write_reaches_the_real_ehr_only_after_approve(home, tool, decision):
    question, _, sql, shown = WRITES[tool]
    model = ScriptedModel(script(tool, approved=decision == "approve"))
    tools = InProcessToolBox()
    app = ClinicApp(Settings(), model_loader=lambda settings, progress: model, tools_factory=lambda: tools,
                    sessions_path=home / "sessions.sqlite", cursor_blink=False, health_interval=0)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.main.status.health == {"ehr": True, "knowledge": True, "umls": True}
        app.open_patient(PATIENT, "John Smith")
        await wait_until(pilot, lambda: "ALLERGIES" in panel(app), what="the real chart")
        assert "John Smith" in panel(app) and shown not in panel(app)
        assert rows(sql) == 0
        await ask(pilot, question)
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        assert rows(sql) == 0  # nothing is written while the clinician decides
        await pilot.press({"approve": "ctrl+y", "reject": "ctrl+r", "escape": "escape"}[decision])
        await wait_until(pilot, lambda: app.turn is None, what="the turn")
        await settle(pilot)
        assert model.pending() == {}
        if decision == "approve":
            assert rows(sql) == 1
            await wait_until(pilot, lambda: shown in panel(app), what="the chart to show the write")
        else:
            assert rows(sql) == 0
            assert shown not in panel(app)
            execute = [e for e in app.main.trace.events(1) if e.node == "TOOL_EXECUTE"][0]
            assert execute.output["error_type"] == "rejected_by_user"


AMOXICILLIN_FOR_PAT_006 = {"patient_id": "pat-006", "medication_name": "amoxicillin", "dosage": "500 mg",
                           "frequency": "three times daily", "notes": None}


def _amoxicillin_app(home, result: dict, answer: str) -> ClinicApp:
    """The terminal over the real record, with a model that proposes amoxicillin for pat-006
    (penicillin-allergic); the result's label and the answer are code's (``result`` and
    ``answer`` say what the test expects of them, for the reader)."""
    model = ScriptedModel({IC: [intent("prescribe_medication")],
                           TS: [{"tool_name": "prescribe_medication"}, AMOXICILLIN_FOR_PAT_006]})
    tools = InProcessToolBox()
    return ClinicApp(Settings(), model_loader=lambda settings, progress: model, tools_factory=lambda: tools,
                     sessions_path=home / "sessions.sqlite", cursor_blink=False, health_interval=0)


async def test_the_safety_gate_shows_a_penicillin_allergy_before_approval(home):
    """pat-006 Emily Johnson has a recorded penicillin allergy: amoxicillin is flagged, high, in
    the dialog, from the real chart and the real local drug data."""
    app = _amoxicillin_app(home, {"quality": "error_fatal", "brief_summary": "Not approved."},
                           "Nothing was written to the record.")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "Prescribe amoxicillin 500 mg three times daily for pat-006")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        findings = str(app.screen.query_one("#approval-findings").render())
        assert "HIGH" in findings and "penicillin" in findings.lower()
        assert findings.index("HIGH") < findings.find("MODERATE") if "MODERATE" in findings else True
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.turn is None, what="the turn")
        execute = [e for e in app.main.trace.events(1) if e.node == "TOOL_EXECUTE"][0]
        assert execute.output["safety"]["blocking"] is True  # the report travels with the result
        clinician = app.author_name()
    (event,) = trail("pat-006")  # nothing written; the rejection is on the audit log, with what it refused
    details = json.loads(event["arguments"])["details"]
    assert (event["tool"], details["tool"], details["clinician"]) == ("rejection", "prescribe_medication", clinician)
    assert details["safety"]["blocking"] is True and details["safety"]["findings"][0]["kind"] == "allergy"


async def test_approving_a_blocking_prescription_is_an_override_with_the_typed_reason(home):
    """The clinician saw the high finding and approved anyway: the write's audit row says so,
    with their name and the reason they typed in the dialog."""
    app = _amoxicillin_app(home, good("Written."), "Done: the record was updated.")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "Prescribe amoxicillin 500 mg three times daily for pat-006")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval dialog")
        app.screen.query_one("#approval-reason", Input).value = "allergy delabelled by the allergist"
        await pilot.press("ctrl+y")
        await wait_until(pilot, lambda: app.turn is None, what="the turn")
        clinician = app.author_name()
    (row,) = trail("pat-006")
    approval = json.loads(row["result"])["approval"]
    assert (row["tool"], approval["decision"], approval["clinician"]) == ("prescribe_medication", "override", clinician)
    assert approval["safety"]["override_reason"] == "allergy delabelled by the allergist"
    assert approval["safety"]["findings"][0]["severity"] == "high"
    assert EhrRepository(locations.ehr_db_path()).verify_audit().ok


def trail(patient: str) -> list[dict]:
    return EhrRepository(locations.ehr_db_path()).audit_trail(patient)
