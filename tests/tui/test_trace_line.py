"""The trace's one-line summaries speak clinically; internal names stay in the details."""

from __future__ import annotations

from appliance.agent.state import TraceEvent
from tui.widgets.trace_panel import detail_lines, trace_line


def test_tool_lines_show_the_clinical_label_and_details_keep_the_name():
    event = TraceEvent("TOOL_EXECUTE", "Running the check", 0.2, {}, tool="check_drug_safety",
                       args={"drug_name": "[warfarin]"}, result_summary="boxed warning found")
    line = trace_line(event).plain
    assert "Drug Safety Report" in line and "check_drug_safety" not in line
    assert '"[warfarin]"' in line and "boxed warning found" in line
    assert any("check_drug_safety" in detail for detail in detail_lines(event))


def test_intent_line_names_the_suggested_tool_by_its_label():
    event = TraceEvent("INTENT_CLASSIFY", "Understanding the question", 0.5,
                       {"intent": "TOOL_NEEDED", "suggested_tool": "search_patient"})
    assert trace_line(event).plain.endswith("· TOOL_NEEDED (Patient Search)")
