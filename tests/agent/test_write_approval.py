"""Approval is a hook outside the executor (docs/design.md §4.4, §13): ``call_tool`` asks it for
writes only, with the validated arguments, and sends what it approved; ``WriteApproval`` wraps
the front end's approver and applies the one safety policy after it."""

from __future__ import annotations

from appliance.agent.nodes.tool_execute import call_tool, execute
from appliance.agent.state import ToolResult
from appliance.agent.tool_results import error_result
from appliance.agent.write_approval import Approved, WriteApproval
from appliance.tools.base import Approval, approve_all
from appliance.tools.scripted import ScriptedToolBox

NOTE = {"patient_id": "abc-123", "note_text": "Seen today, stable.", "note_type": "progress"}


class Hook:
    """An approval hook that records what it was asked and answers as told."""

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def __call__(self, tool, clean, patient_ids=None):
        self.asked.append((tool, dict(clean), patient_ids))
        return self.answer(tool, clean)


def _box():
    return ScriptedToolBox({"save_clinical_note": [{"result": {"id": "n-1", "status": "saved"}}],
                            "get_patient_chart": [{"result": {"patient": {"patient_id": "abc-123"}}}]},
                           fallback=None, drug_names=[])


def test_a_read_never_asks_the_hook_and_a_write_asks_it_once_with_the_validated_arguments():
    box = _box()
    hook = Hook(lambda tool, clean: Approved({**clean, "note_text": "Seen today, stable. Reviewed."}, None,
                                             {"decision": "approved"}))
    assert call_tool("get_patient_chart", {"patient_id": " abc-123 "}, box, 5.0, hook).error_type is None
    assert hook.asked == []
    result = call_tool("save_clinical_note", dict(NOTE), box, 5.0, hook)
    assert result.error_type is None and result.approval_seconds is not None
    assert [t for t, _, _ in hook.asked] == ["save_clinical_note"]
    sent = [args for tool, args in box.calls if tool == "save_clinical_note"]
    assert sent == [{**NOTE, "note_text": "Seen today, stable. Reviewed."}]  # what the hook approved is what is sent


def test_a_rejection_from_the_hook_is_the_result_and_nothing_is_sent():
    box = _box()
    refused = error_result("save_clinical_note", NOTE, "rejected_by_user", "not now")
    result = call_tool("save_clinical_note", dict(NOTE), box, 5.0, Hook(lambda tool, clean: refused))
    assert isinstance(result, ToolResult) and result.error_type == "rejected_by_user"
    assert "Reason given: not now." in result.error and result.approval_seconds is not None
    assert box.calls == []


def test_execute_wraps_the_front_ends_approver_in_the_hook():
    box, seen = _box(), []

    def approver(tool, args, safety=None):
        seen.append((tool, safety))
        return Approval(True, args)

    assert execute("save_clinical_note", dict(NOTE), box, approver, 5.0).error_type is None
    assert seen == [("save_clinical_note", None)]  # no order, so no safety report
    hook = WriteApproval(approve_all, box, 5.0)
    assert isinstance(hook("save_clinical_note", dict(NOTE)), Approved)
