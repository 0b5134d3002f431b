"""A switch end to end (in-process MCP servers over real SQLite, a scripted model never asked to
pick the call): "switch lisinopril to losartan 50 mg daily" is one approved change that stops
lisinopril ("switched to losartan") and writes losartan linked to it, checked by the gate as
losartan against the chart without lisinopril; never two active orders. Without losartan's
dose the clinician is asked for it and nothing is written."""

from __future__ import annotations

import json

import pytest

from appliance.agent.graph import Agent
from appliance.cli import main
from appliance.config import Settings
from appliance.llm.fake import ScriptedModel
from tests.medication.test_order_change_flow import (
    TS,
    Clinician,
    InProcessToolBox,
    _orders,
    _script,
    _turn,
    home,
)

__all__ = ["home"]  # the fixture, shared with the change flow's tests
pytestmark = pytest.mark.timeout(120)


def test_a_switch_stops_the_old_order_and_writes_the_new_one_linked_in_one_approved_write(home, capsys):
    (old,) = [o for o in _orders("abc-123", "lisinopril") if o["status"] == "active"]
    clinician = Clinician()
    result = _turn("switch lisinopril to losartan 50 mg daily due to cough", "abc-123", "change_medication_order",
                   clinician)
    ((tool, args, report),) = clinician.seen  # one approval for the whole switch
    assert tool == "change_medication_order"
    assert args == {"patient_id": "abc-123", "medication_name": "lisinopril", "new_medication_name": "losartan",
                    "dosage": "50 mg", "frequency": "daily", "reason": "cough"}
    assert report.drug == "losartan"  # checked as the new drug ...
    assert not [f for f in report.findings if "lisinopril" in f.text.lower()]  # ... without the order it stops
    assert result.tool_calls[-1]["error_type"] is None
    (stopped,) = [o for o in _orders("abc-123", "lisinopril") if o["id"] == old["id"]]
    assert (stopped["status"], stopped["status_reason"]) == ("stopped", "switched to losartan: cough")
    assert not [o for o in _orders("abc-123", "lisinopril") if o["status"] == "active"]
    (new,) = [o for o in _orders("abc-123", "losartan") if o["status"] == "active"]
    assert (new["replaces_id"], new["dosage"], new["frequency"]) == (old["id"], "50 mg", "daily")
    assert json.loads(new["dosage_instruction"])["doseAndRate"][0]["doseQuantity"]["value"] == 50
    assert main(["audit", "show", "--patient", "abc-123", "--json"]) == 0
    (row,) = [r for r in json.loads(capsys.readouterr().out)["rows"] if r["tool"] == "change_medication_order"]
    arguments, outcome = json.loads(row["arguments"]), json.loads(row["result"])
    assert (arguments["order_id"], arguments["new_medication_name"], outcome["replaces"], outcome["id"]) == \
        (old["id"], "losartan", old["id"], new["id"])


def test_a_switch_without_the_new_drugs_dose_asks_for_it_and_writes_nothing(home):
    before = _orders("abc-123", "lisinopril") + _orders("abc-123", "losartan")

    def approver(tool, args, safety=None):
        raise AssertionError("a question is never put to approval")

    model = ScriptedModel(_script("change_medication_order"))
    tools = InProcessToolBox()
    try:
        result = Agent(model, tools, Settings(), approver).run_turn("switch lisinopril to losartan",
                                                                    patient_id="abc-123")
    finally:
        tools.close()
    assert TS not in [h.node for h in model.history]
    assert "To switch lisinopril to losartan, say losartan's dose and how often" in result.response, result.response
    assert _orders("abc-123", "lisinopril") + _orders("abc-123", "losartan") == before


def test_a_switch_whose_new_drug_is_edited_in_approval_is_checked_again_as_the_edited_drug(home):
    from appliance.tools.base import Approval

    seen: list = []

    def approver(tool, args, safety=None):
        seen.append((dict(args), safety))
        if len(seen) == 1:  # the clinician picks another ARB in the dialog
            return Approval(True, {**args, "new_medication_name": "valsartan", "dosage": "80 mg"},
                            override_reason=None, reauthenticated=None)
        return Approval(False, dict(args), "checking the second report only")

    model = ScriptedModel({**_script("change_medication_order")})
    tools = InProcessToolBox()
    try:
        Agent(model, tools, Settings(), approver).run_turn("switch lisinopril to losartan 50 mg daily",
                                                           patient_id="abc-123")
    finally:
        tools.close()
    assert [s[1].drug for s in seen] == ["losartan", "valsartan"]  # shown again, checked as the edited drug
    assert [o["status"] for o in _orders("abc-123", "lisinopril")] == ["active"]  # then refused: nothing written
