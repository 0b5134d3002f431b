"""What a stopped turn says it wrote, from its trace alone (both front ends use these words)."""

from __future__ import annotations

import pytest

from appliance.agent.state import TraceEvent
from appliance.conversation.turn_outcome import saved_words, stopped_words, writes_done


def execute(tool: str, pid: str, error_type: str | None = None) -> TraceEvent:
    return TraceEvent("TOOL_EXECUTE", "Consulting a source", 0.1, {"error_type": error_type} if error_type else {},
                      tool=tool, args={"patient_id": pid})


CASES = [
    ("nothing ran", [], "nothing was written to the record"),
    ("reads only", [execute("get_patient_chart", "pat-005")], "nothing was written to the record"),
    ("a write ran", [execute("get_patient_chart", "pat-005"), execute("prescribe_medication", "pat-005")],
     "saved to the record before the stop: Prescription for pat-005; nothing else was written"),
    ("a write rejected", [execute("add_allergy", "pat-005", "rejected_by_user")],
     "nothing was written to the record; not written: Allergy Documentation for pat-005 (not approved); "
     "nothing else was written"),
    ("one ran, one refused", [execute("prescribe_medication", "pat-005"),
                              execute("save_clinical_note", "pat-005", "invalid_args")],
     "saved to the record before the stop: Prescription for pat-005; not written: Clinical Note for pat-005 "
     "(not written); nothing else was written"),
    ("a write timed out: unknown, never 'not written'", [execute("add_allergy", "pat-005", "timeout")],
     "nothing was confirmed written to the record; unknown, no answer in time (check the chart): "
     "Allergy Documentation for pat-005; nothing else was written"),
]


@pytest.mark.parametrize("case,trace,words", CASES, ids=[c[0] for c in CASES])
def test_stopped_words(case, trace, words):
    assert stopped_words(trace) == words
    assert saved_words(trace) == "; ".join(f"Prescription for {e.args['patient_id']}" for e in writes_done(trace))
