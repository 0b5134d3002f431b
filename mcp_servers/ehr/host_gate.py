"""The clinic host's safety gate as the EHR server runs it before a write that prescribes:
the check's types (``PrescriptionCheck``, ``PrescriptionRefused``, ``Reauthentication``) and
``check_prescription``, which runs a check over the patient's chart and keeps its report.

Invariants:
- The chart is read here, not logged as a clinician's read; a change's own order is left out of
  it (``order_tools.chart_without``), so an order is no duplicate of its own change.
- A refusal is recorded on the audit chain as a rejection (decided by the clinic host's gate)
  and raised as ``rejected_by_user`` saying the record was not changed.
- The approval kept is the host's decision and report, never the client's; an override's
  password given again goes to the check with the account it must open (the token's, when the
  call is bound), and no further.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastmcp.exceptions import ToolError

from ehr_db.repository import EhrRepository
from mcp_servers.contracts import ApprovalRecord
from mcp_servers.ehr import order_tools
from mcp_servers.ehr.callers import Caller
from mcp_servers.ehr.faults import NOT_CHANGED
from mcp_servers.tool_errors import tool_error_message

log = logging.getLogger("mcp_servers.ehr.server")


class PrescriptionRefused(Exception):
    """The host's safety gate refused a prescription; the message says why, ``safety`` is the
    report's audit entry."""

    def __init__(self, message: str, safety: dict[str, Any] | None = None):
        super().__init__(message)
        self.safety = safety


@dataclass(frozen=True)
class Reauthentication:
    """The account an override must open and the password sent with it (None: none sent)."""

    account: str
    password: str | None = field(default=None, repr=False)


# (prescription: patient_id, medication_name, dosage, frequency; the patient's chart; the
# approval as the request sent it, or None; the override's password given again) ->
# {"decision": "approval" | "override", "safety": the report's audit entry}; raises
# PrescriptionRefused. Set by the host (``appliance serve``).
PrescriptionCheck = Callable[[dict[str, str], dict[str, Any], dict[str, Any] | None, Reauthentication],
                             dict[str, Any]]


def check_prescription(check: PrescriptionCheck, repo: EhrRepository, caller: Caller, kept: dict[str, Any] | None,
                       prescription: dict[str, str], password: str | None = None, *,
                       tool: str = "prescribe_medication", without: str | None = None) -> dict[str, Any]:
    """The host's safety gate over the patient's chart (read here, not logged as a clinician's
    read): the approval to keep, with the host's report; a refusal is recorded as a rejection
    and raised as ``rejected_by_user`` with the gate's reason. An override's password given
    again goes to the check with the account it must open (the token's), and no further."""
    # ``without``: the id of the order a change replaces, left out of the chart checked (it is
    # no duplicate of its own change).
    chart = order_tools.chart_without(repo.get_patient_chart(prescription["patient_id"]), without)
    account = caller.author if caller.bound else ((kept or {}).get("clinician") or caller.author)
    try:
        decided = check(prescription, chart, kept, Reauthentication(account, password))
    except PrescriptionRefused as exc:
        log.info("%s: refused by the host's safety gate", tool)
        repo.record_event("rejection", chart["patient"]["patient_id"], caller.author, {
            "tool": tool, "clinician": caller.author, "reason": str(exc)[:2000],
            "decided_by": "the clinic host's safety gate", "safety": exc.safety})
        raise ToolError(tool_error_message("rejected_by_user", str(exc) + NOT_CHANGED)) from None
    clinician = (kept or {}).get("clinician") or caller.author
    return {"decision": decided["decision"], "clinician": clinician, "safety": decided["safety"]}


def override_password(approval: ApprovalRecord | None) -> str | None:
    """An override's password given again with the approval, for the host's check."""
    secret = getattr(approval, "password", None) if approval is not None else None
    return secret.get_secret_value() if secret is not None else None
