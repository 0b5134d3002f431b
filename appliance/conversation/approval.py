"""The approval round trip as both front ends hold it: what the clinician is asked about a
proposed write (``asked``) and what their answer means (``answered``). The terminal's dialog
and the line session's prompt only show the question and read the answer.

Invariants:
- Only an explicit approve approves; anything else (reject, a dismissed dialog, end of input)
  is a rejection, carrying the clinician's words when they gave any (they reach the answer as
  the reason given).
- Approving a write whose safety report needs an override (``SafetyReport.needs_override``) is
  an override: its reason is the clinician's words (``safety.report.override_reason``: spaces
  folded, cut to length, None when blank) and the password given again is checked by
  ``reauthenticate`` (True right, False missing or wrong, None where there are no accounts).
  Whether that is enough is ``appliance.safety.policy``'s to decide, at the record's door.
- The patient written to is named, and said when it is not the conversation's current patient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from appliance.conversation.current import CurrentPatient
from appliance.safety.report import override_reason
from appliance.tools.base import Approval


@dataclass(frozen=True)
class Asked:
    """What the clinician is asked about a write, beside its exact arguments."""

    patient_id: str | None  # the patient written to (None: the write names none)
    patient: str  # that patient as the conversation knows them ("pat-001 (Maria Garcia)")
    not_current: bool  # written to a patient who is not the current one
    needs_override: bool  # approving it is an override: a reason and the password again


def asked(args: dict, current: CurrentPatient | None = None, safety=None) -> Asked:
    pid = args.get("patient_id")
    label = current.label(pid) if (current is not None and pid) else str(pid or "")
    other = bool(pid) and current is not None and current.patient_id is not None and pid != current.patient_id
    return Asked(pid, label, other, bool(getattr(safety, "needs_override", False)))


def answered(args: dict, approved: bool, safety=None, *, reason: str | None = None, password: str | None = None,
             reauthenticate: Callable[[str | None], bool | None] = lambda password: False,
             rejected: str | None = None) -> Approval:
    """The clinician's answer as the agent's ``Approval``: approved or not, with the arguments
    approved, the reason given (``rejected``: a rejection's words when the clinician gave none)
    and, for an override, the reason and the password checked."""
    if not approved:
        return Approval(False, args, reason or rejected)
    if not getattr(safety, "needs_override", False):
        return Approval(True, args, reason)
    return Approval(True, args, reason, override_reason=override_reason(reason),
                    reauthenticated=reauthenticate(password), password=password)
