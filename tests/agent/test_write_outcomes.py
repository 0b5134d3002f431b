"""A write's call through TOOL_EXECUTE: one idempotency key per approved write, made by code;
an unknown outcome says the record may or may not have changed, and nothing contradicts it."""

from __future__ import annotations

import uuid

from appliance.agent.nodes import synthesize
from appliance.agent.nodes.tool_execute import execute, unknown_write_message
from appliance.tools.base import ToolOutcome, approve_all
from mcp_servers.contracts import ARG_SCHEMAS, IDEMPOTENCY_KEY, SIG
from tests.agent.helpers import state

ARGS = {"patient_id": "abc-123", "medication_name": "metformin", "dosage": "500 mg", "frequency": "twice daily",
        "notes": None}


class Box:
    def __init__(self, outcome: ToolOutcome):
        self.outcome = outcome
        self.calls: list[tuple[str, dict, str | None]] = []

    def call(self, tool, args, deadline, *, idempotency_key=None, approval=None):
        self.calls.append((tool, dict(args), idempotency_key))
        return self.outcome


def test_each_approved_write_gets_a_fresh_key_outside_the_models_arguments():
    box = Box(ToolOutcome(result={"id": "x"}))
    for _ in range(2):
        assert execute("prescribe_medication", dict(ARGS), box, approve_all, 5.0).error_type is None
    (_, args1, key1), (_, args2, key2) = box.calls
    sig = args1.pop(SIG)  # the sig code read from the approved words, beside the contract's arguments
    assert args2.pop(SIG) == sig and sig["dosage_instruction"]["doseAndRate"][0]["doseQuantity"]["value"] == 500
    assert args1 == args2 == ARGS and IDEMPOTENCY_KEY not in args1  # the contract's arguments only
    assert key1 != key2 and uuid.UUID(key1) and uuid.UUID(key2)
    assert IDEMPOTENCY_KEY not in ARG_SCHEMAS["prescribe_medication"].model_fields


def test_reads_carry_no_key():
    box = Box(ToolOutcome(result={"patient": {}}))
    execute("get_patient_chart", {"patient_id": "abc-123"}, box, approve_all, 5.0)
    assert box.calls[0][2] is None


def test_a_write_whose_outcome_is_unknown_says_check_the_chart():
    box = Box(ToolOutcome(error_type="timeout", message="no answer", uncertain=True))
    result = execute("prescribe_medication", dict(ARGS), box, approve_all, 5.0)
    assert result.outcome_unknown and result.error_type == "timeout"
    assert result.error == unknown_write_message("prescribe_medication")
    assert "may or may not have been changed: check the chart" in result.error
    assert "try again shortly" not in result.error
    st = state("Prescribe metformin 500mg twice daily for abc-123", [result], intent="TOOL_NEEDED")
    assert synthesize.record_unchanged(st) is False  # "The record was not changed." would be a guess


def test_a_write_the_server_refused_is_certain():
    box = Box(ToolOutcome(error_type="invalid_args", message="dosage needs a unit"))
    result = execute("prescribe_medication", dict(ARGS), box, approve_all, 5.0)
    assert not result.outcome_unknown
    st = state("Prescribe metformin 500mg twice daily for abc-123", [result], intent="TOOL_NEEDED")
    assert synthesize.record_unchanged(st) is True
