"""The one rule for when a new conversation starts, written once and applied only by the
conversation core (``core``), so the terminal and the line session split conversations at the
same patient switches.

Invariants:
- A conversation is about every patient its saved exchanges touched: the patient open (or
  current) when each question was asked, and every ``patient_id`` in that turn's tool calls.
- Opening a patient starts a new conversation exactly when the conversation is about some other
  patient; opening the same patient again, closing the patient, or opening one in an empty
  conversation keeps it. The previous conversation stays saved; one patient's facts are never
  another's context.
"""

from __future__ import annotations

from collections.abc import Iterable


def turn_patients(patient_id: str | None, trace: Iterable) -> set[str]:
    """The patients one exchange touched: its open patient and every patient ID its calls
    named (``trace`` holds ``TraceEvent``s or their saved dicts)."""
    found = {patient_id} if patient_id else set()
    for event in trace:
        args = event.get("args") if isinstance(event, dict) else getattr(event, "args", None)
        if isinstance(args, dict) and args.get("patient_id"):
            found.add(str(args["patient_id"]))
    return found


def starts_new_conversation(about: set[str], opened: str | None) -> bool:
    """True when opening ``opened`` must start a new conversation (see the module docstring)."""
    return opened is not None and bool(set(about) - {opened})
