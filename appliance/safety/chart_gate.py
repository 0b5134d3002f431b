"""The gate as the agent runs it: read the patient's chart and the local drug data through the
agent's own tools, then ``check_prescription``.

Invariant: it never fails a turn and never reports a clean check it did not make. A chart that
cannot be read is checked as an empty chart (every chart check then says "not checked"); a tool
box that raises instead of answering gives a report whose only finding says the check did not
run (high, so a headless run is refused without an override).
"""

from __future__ import annotations

from dataclasses import replace

from appliance.errors import ApplianceError
from appliance.safety.gate import check_prescription
from appliance.safety.knowledge import SafetyLookupError, ToolBoxKnowledge
from appliance.safety.report import CHECKS, Finding, SafetyReport

NOT_RUN = "the medication safety check could not run: check allergies, interactions and duplicates yourself"


class ChartSafetyGate:
    """``gate(args) -> SafetyReport`` for a prescribe_medication call's validated arguments."""

    def __init__(self, tools, deadline: float):
        self._tools = tools
        self._deadline = deadline

    def __call__(self, args: dict, *, replacing=None) -> SafetyReport:
        """``replacing``: for a change of an order on the chart, (chart, args) -> (the chart
        without that order, the prescription the change makes), applied to the chart read."""
        drug = str(args.get("medication_name") or "")
        try:
            outcome = self._tools.call("get_patient_chart", {"patient_id": args.get("patient_id")}, self._deadline)
            chart = outcome.result if outcome.ok and isinstance(outcome.result, dict) else {}
            if replacing is not None:
                chart, args = replacing(chart, args)
                drug = str(args.get("medication_name") or "")
            report = check_prescription(drug, chart, ToolBoxKnowledge(self._tools, self._deadline),
                                        dosage=args.get("dosage"), frequency=args.get("frequency"),
                                        notes=args.get("notes"))
            return replace(report, chart=chart or None)
        except (ApplianceError, SafetyLookupError, OSError, TimeoutError):
            return not_run(drug)


def not_run(drug: str) -> SafetyReport:
    return SafetyReport(drug=drug, resolved=(), ingredients=(),
                        findings=(Finding("not_checked", "high", NOT_RUN, {}, "gate"),),
                        checked=dict.fromkeys(CHECKS, False))
