"""What a turn did to the record, read from its trace, in the words both front ends show when
the clinician stops an answer (the terminal's Escape, the line session's Ctrl+C).

Invariants:
- Only the trace decides: a write counts as written when its ``TOOL_EXECUTE`` event ran a write
  tool with no ``error_type`` (the record's own answer), never from the model's words.
- The words name every write that ran and every write that did not (rejected, refused, failed),
  and end by saying nothing else was written, so a stopped answer never hides a write; a write
  that timed out is said to be unknown (it may have reached the record), never "not written".
- Patients are named by ID only (no chart text): the words are also saved with the session.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp_servers.contracts import TOOL_LABELS, WRITE_TOOLS

_NOT_WRITTEN = {"rejected_by_user": "not approved"}
UNSURE = "timeout"  # no answer in time: the write may have reached the record


def _writes(events: Iterable) -> list:
    return [e for e in events if e.node == "TOOL_EXECUTE" and e.tool in WRITE_TOOLS]


def _named(event) -> str:
    pid = (event.args or {}).get("patient_id")
    return f"{TOOL_LABELS.get(event.tool, event.tool)} for {pid}" if pid else TOOL_LABELS.get(event.tool, event.tool)


def writes_done(events: Iterable) -> list:
    """The trace's writes that ran: approved and carried out by the record."""
    return [e for e in _writes(events) if not (e.output or {}).get("error_type")]


def writes_not_done(events: Iterable) -> list:
    """The trace's proposed writes that did not reach the record."""
    return [e for e in _writes(events) if (e.output or {}).get("error_type")]


def saved_words(events: Iterable) -> str:
    """The writes that ran, joined ("Prescription for pat-005; Clinical Note for pat-005"), or ""."""
    return "; ".join(_named(e) for e in writes_done(events))


def stopped_words(events: Iterable) -> str:
    """One line: what the stopped turn wrote to the record, what it may have written (a write
    with no answer in time) and what it did not."""
    events = list(events)
    saved = saved_words(events)
    failed = writes_not_done(events)
    unsure = "; ".join(_named(e) for e in failed if e.output.get("error_type") == UNSURE)
    missed = "; ".join(f"{_named(e)} ({_NOT_WRITTEN.get(e.output.get('error_type'), 'not written')})"
                       for e in failed if e.output.get("error_type") != UNSURE)
    if saved:
        parts = [f"saved to the record before the stop: {saved}"]
    else:
        parts = ["nothing was confirmed written to the record" if unsure else "nothing was written to the record"]
    if unsure:
        parts.append(f"unknown, no answer in time (check the chart): {unsure}")
    if missed:
        parts.append(f"not written: {missed}")
    if saved or failed:
        parts.append("nothing else was written")
    return "; ".join(parts)
