"""The trace's one-line summaries speak clinically; internal names stay in the details."""

from __future__ import annotations

from appliance.agent.state import TraceEvent
from tui.widgets.trace_panel import approval_line, detail_lines, trace_line


def test_tool_lines_show_the_clinical_label_and_details_keep_the_name():
    event = TraceEvent("TOOL_EXECUTE", "Running the check", 0.2, {}, tool="check_drug_safety",
                       args={"drug_name": "[warfarin]"}, result_summary="boxed warning found")
    line = trace_line(event).plain
    assert "Drug Safety Report" in line and "check_drug_safety" not in line
    assert "(drug: [warfarin])" in line and "boxed warning found" in line
    assert any("check_drug_safety" in detail for detail in detail_lines(event))


def test_intent_line_names_the_suggested_tool_by_its_label():
    event = TraceEvent("INTENT_CLASSIFY", "Understanding the question", 0.5,
                       {"intent": "TOOL_NEEDED", "suggested_tool": "search_patient"})
    assert trace_line(event).plain.endswith("· needs a source (Patient Search)")


def test_lines_use_clinical_words_and_keep_the_codes_in_the_details():
    cases = [
        (TraceEvent("INTENT_CLASSIFY", "Understanding the question", 0.4, {"intent": "DIRECT"}), "answered directly"),
        (TraceEvent("RESULT_CLASSIFY", "Checking the result", 0.3, {"quality": "success_rich"}), "found results"),
        (TraceEvent("RESULT_CLASSIFY", "Checking the result", 0.3, {"quality": "no_results"}), "found nothing"),
        (TraceEvent("DETERMINISTIC_ROUTER", "Deciding the next step", 0.0, {}, decision="ERROR_HANDLER",
                    reason="the call failed"), "→ recovering from an error: the call failed"),
        (TraceEvent("DETERMINISTIC_ROUTER", "Deciding the next step", 0.0, {}, decision="SYNTHESIZE",
                    reason="task complete"), "→ writing the answer"),
        (TraceEvent("SYNTHESIZE", "Writing the answer", 3.0, {"kind": "clarification"}), "a question for you"),
    ]
    for event, words in cases:
        line = trace_line(event).plain
        assert words in line, line
        for code in ("DIRECT", "success_rich", "no_results", "ERROR_HANDLER", "SYNTHESIZE", "clarification"):
            assert code not in line
        details = "\n".join(detail_lines(event))
        assert any(code in details for code in ("DIRECT", "success_rich", "no_results", "ERROR_HANDLER",
                                                "SYNTHESIZE", "clarification"))


def test_arguments_read_as_a_list_and_the_raw_json_is_in_the_details():
    event = TraceEvent("TOOL_EXECUTE", "Consulting a source", 0.1, {}, tool="prescribe_medication",
                       args={"patient_id": "abc-123", "medication_name": "metformin", "dosage": "500 mg",
                             "frequency": "twice daily", "notes": None})
    line = trace_line(event).plain
    assert "(patient: abc-123; medication: metformin; dose: 500 mg; frequency: twice daily)" in line
    assert "{" not in line and any('"medication_name": "metformin"' in d for d in detail_lines(event))


def test_the_wait_for_approval_is_its_own_line_and_not_tool_time():
    event = TraceEvent("TOOL_EXECUTE", "Consulting a source", 12.5, {"error_type": None, "approval_seconds": 12.3},
                       tool="add_allergy", args={"patient_id": "abc-123", "substance": "latex"})
    assert trace_line(event).plain.startswith("Consulting a source 0.2 s")
    assert approval_line(event).plain == "Waiting for your approval 12.3 s · approved"
    rejected = TraceEvent("TOOL_EXECUTE", "Consulting a source", 4.0,
                          {"error_type": "rejected_by_user", "approval_seconds": 4.0}, tool="add_allergy", args={})
    assert approval_line(rejected).plain.endswith("· rejected")
    reads = TraceEvent("TOOL_EXECUTE", "Consulting a source", 0.2, {"error_type": None}, tool="get_patient_chart",
                       args={"patient_id": "abc-123"})
    assert approval_line(reads) is None
