"""The write tools' hidden parameters and the audit event tool: set by the agent's code, never
by the model, so they are in no tool's argument model (``arguments``).

Invariants:
- ``IDEMPOTENCY_KEY`` and ``APPROVAL`` go with every write, ``SIG`` with the writes that make
  an order active with a new sig (``Tool.sig``); each is optional, so other clients may omit it.
- ``AUDIT_EVENT_TOOL`` is the EHR server's one tool that is not the model's; it takes only
  rejections (``RejectionDetails``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

# The write tools take two parameters more than their argument models, set by code and never by the model.
# The idempotency key: the agent's code sends a fresh key per approved write; the record performs
# a key once (``ehr_db.repository``). Optional, so other clients may omit it.
IDEMPOTENCY_KEY = "idempotency_key"
IdempotencyKey = Annotated[str | None, Field(
    min_length=8, max_length=100, pattern=r"^[A-Za-z0-9._:-]+$",
    description="Set by the calling code, one per intended write: a repeated key is performed once.",
)]
# The other hidden parameter of the write tools: the approval the write runs under, made by the
# agent's code after the approver said yes, and kept in the write's own audit row (never in
# what a repeated idempotency key is compared on). Optional, so other clients may omit it.
APPROVAL = "approval"
# The record's bound on an approval and on an audit event's details, as JSON (both may carry a
# safety report): ``ehr_db.validation.MAX_AUDIT_JSON_CHARS``; a test keeps the two equal.
MAX_AUDIT_JSON_CHARS = 20_000


class ApprovalRecord(BaseModel):
    """Who let a write run and on what: "override" when the safety report was blocking (a
    high-severity finding) and the write was approved anyway; ``safety`` is the report's audit
    entry (``appliance.safety.SafetyReport.to_audit``, with the override reason), null when no
    safety check ran; ``clinician`` null when the approver named no one."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approval", "override"]
    clinician: str | None = Field(min_length=1, max_length=200)
    safety: dict[str, Any] | None
    # An override's password given again (``appliance.safety.policy``): a clinic host checks it
    # against the token's account itself; never kept, logged or echoed.
    password: SecretStr | None = Field(default=None, max_length=1024)


ApprovalArg = Annotated[ApprovalRecord | None, Field(
    description="Set by the calling code with an approved write: kept in the write's audit row.",
)]

# A third hidden parameter, of the writes that make an order active with a new sig: the order's
# whole sig as code read it from the (approved) words (as needed and what for, the maximum,
# duration, quantity, refills, and the FHIR MedicationRequest shapes), kept by the record beside
# the words. Set by the agent's code after approval, never by the model; optional.
SIG = "sig"


class SigRecord(BaseModel):
    """An order's sig as code read it (``appliance.medication.sig``); text fields as written."""

    model_config = ConfigDict(extra="forbid")

    as_needed: bool | None
    as_needed_for: str | None = Field(max_length=60)
    max_per_period: str | None = Field(max_length=60)
    duration: str | None = Field(max_length=40)
    quantity: str | None = Field(max_length=40)
    refills: int | None = Field(ge=0, le=99)
    dosage_instruction: dict[str, Any] | None
    dispense_request: dict[str, Any] | None


SigArg = Annotated[SigRecord | None, Field(
    description="Set by the calling code with an approved order: the sig as code read it.",
)]

# The EHR server's one tool that is not the model's (no record in the catalogue): the agent's approval
# code records a rejected write with it on the record's hash-chained audit log. Rejections are
# the only kind a client may record: an approval or override is kept in the write's own audit
# row, made by the record from the write itself, never a free-standing claim.
AUDIT_EVENT_TOOL = "record_audit_event"
AuditEventKind = Literal["rejection"]


class RejectionDetails(BaseModel):
    """What a client may say of a write the clinician refused: exactly these fields, bounded,
    so a client's row can never carry the fields the record's own rows use ("decided_by",
    "decision") or any other free-form key."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(pattern=r"^[a-z][a-z_]{0,63}$")  # the write tool that was refused
    clinician: str | None = Field(min_length=1, max_length=200)
    reason: str | None = Field(max_length=2000)
    safety: dict[str, Any] | None  # the safety report's audit entry shown with the refused write

