"""Tool contracts: the one place that says what each agent tool is called, what it takes,
what it returns and how it fails.

Invariants:
- The agent (TOOL_SELECT stage 2) builds its grammar from ``ARG_SCHEMAS``; the MCP servers
  expose tools whose names and parameters match them (a test checks the servers' input
  schemas against this module).
- Every argument field is required; fields that may be empty are nullable, never defaulted,
  because the grammar converter moves defaulted fields to the end (docs/design.md §6).
- Decision-critical fields come first (docs/design.md §6): ``patient_id`` before everything else.
- Expected failures travel as an MCP ``ToolError`` whose message is ``"<error_type>: <text>"``
  (``mcp_servers.tool_errors``, whose names this module also gives).
- The write tools' hidden parameters (``IDEMPOTENCY_KEY``, ``APPROVAL``) are set by the agent's
  code after approval; they are not in ``ARG_SCHEMAS``, so the model never sees or fills them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr

from common.patient_ids import MAX_PATIENT_ID_LENGTH

# How a tool fails is part of its contract: its callers read these names from here too.
from mcp_servers.tool_errors import (  # noqa: F401  # noqa: F401  # noqa: F401
    ERROR_TYPES,
    NOT_IN_DATABASE_CAVEATS,
    ErrorType,
    drugs_not_found,
    drugs_not_found_text,
    parse_tool_error,
    tool_error_message,
)

# MCP annotations of a lookup that reads a rebuilt store and nothing else (the UMLS and
# knowledge servers' tools): same answer for the same call, no side effect, nothing outside.
READ_ONLY = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}

# Bounded strings keep a weak model from running away inside a JSON string.
Name = Annotated[str, Field(min_length=1, max_length=60)]
ShortText = Annotated[str, Field(min_length=1, max_length=120)]

# Demo IDs are "abc-123", imported (Synthea) ones UUIDs; any FHIR resource id is accepted
# (common.patient_ids) and the record answers "patient_not_found" for one it does not hold.
# Only the length is in the schema: the agent parses the model's arguments against it and the
# grammar takes no patterns, so the character rule is checked by code after the parse (the
# agent's TOOL_EXECUTE and the record), where a malformed ID becomes a question, not a failure.
PatientId = Annotated[str, Field(min_length=1, max_length=MAX_PATIENT_ID_LENGTH)]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DrugSafetyArgs(_Args):
    drug_name: Name


class DrugInteractionArgs(_Args):
    drug_names: list[Name] = Field(min_length=2, max_length=6, description="Two or more drug names")


class LiteratureSearchArgs(_Args):
    query: str = Field(min_length=1, max_length=120, description="Search query for medical literature")


def _whole_number(text: str) -> str:
    """Digits only, as a whole number of at most three digits ("64", not "64.5" or "sixty")."""
    value = text.strip()
    if not value.isdigit():
        raise ValueError("must be a whole number written in digits")
    return str(int(value))


# Numbers the model fills are digit strings: the fast decoder handles no numbers
# (appliance.llm.fast), and a string keeps the schema on it. Code reads them as ints.
Years = Annotated[str, Field(min_length=1, max_length=3, description="Whole years, digits only"),
                  AfterValidator(_whole_number)]
PageSize = Annotated[str, Field(min_length=1, max_length=3, description="Trials per page, digits only (capped at 50)"),
                     AfterValidator(_whole_number)]
TrialStatus = Literal["recruiting", "active", "completed", "any"]
TrialPhase = Literal["early_phase1", "phase1", "phase2", "phase3", "phase4", "not_applicable"]
StudyType = Literal["interventional", "observational", "expanded_access"]
NctId = Annotated[str, Field(min_length=1, max_length=20)]


class ClinicalTrialsArgs(_Args):
    """A trial search with ClinicalTrials.gov's meanings (docs/design.md §12): status null means
    recruiting (the default), "any" every status; the patient's sex and age keep the trials
    that take them."""

    condition: Name
    intervention: Name | None
    eligibility_keywords: ShortText | None
    status: TrialStatus | None
    phase: TrialPhase | None
    sex: Literal["female", "male"] | None
    patient_age: Years | None
    study_type: StudyType | None
    page_size: PageSize | None


class TrialDetailsArgs(_Args):
    nct_id: NctId


class PrescreenArgs(_Args):
    patient_id: PatientId
    condition: Name | None


class PatientSearchArgs(_Args):
    name: Name


class PatientChartArgs(_Args):
    patient_id: PatientId


class PrescribeMedicationArgs(_Args):
    patient_id: PatientId
    medication_name: Name
    dosage: str = Field(min_length=1, max_length=40)
    frequency: str = Field(min_length=1, max_length=40)
    notes: str | None = Field(max_length=200)


class ChangeMedicationArgs(_Args):
    """A new dose or frequency for an order on the chart: null keeps the order's own."""

    patient_id: PatientId
    medication_name: Name
    dosage: str | None = Field(max_length=40)
    frequency: str | None = Field(max_length=40)
    reason: str | None = Field(max_length=200)


OrderAction = Literal["stop", "hold", "resume", "renew"]


class MedicationStatusArgs(_Args):
    patient_id: PatientId
    medication_name: Name
    action: OrderAction
    reason: str | None = Field(max_length=200)


class AddAllergyArgs(_Args):
    patient_id: PatientId
    substance: Name
    reaction: ShortText
    severity: Literal["mild", "moderate", "severe"] | None


class ClinicalNoteArgs(_Args):
    patient_id: PatientId
    note_type: Literal["progress", "consult", "procedure", "discharge", "telephone", "other"]
    note_text: str = Field(min_length=1, max_length=1500)


class ImageAnalysisArgs(_Args):
    query: str = Field(min_length=1, max_length=120, description="What to look for in the image")


ToolName = Literal[
    "check_drug_safety",
    "check_drug_interactions",
    "search_medical_literature",
    "find_clinical_trials",
    "get_trial_details",
    "prescreen_for_trials",
    "search_patient",
    "get_patient_chart",
    "prescribe_medication",
    "change_medication_order",
    "update_medication_status",
    "add_allergy",
    "save_clinical_note",
    "analyze_medical_image",
]

ARG_SCHEMAS: dict[str, type[BaseModel]] = {
    "check_drug_safety": DrugSafetyArgs,
    "check_drug_interactions": DrugInteractionArgs,
    "search_medical_literature": LiteratureSearchArgs,
    "find_clinical_trials": ClinicalTrialsArgs,
    "get_trial_details": TrialDetailsArgs,
    "prescreen_for_trials": PrescreenArgs,
    "search_patient": PatientSearchArgs,
    "get_patient_chart": PatientChartArgs,
    "prescribe_medication": PrescribeMedicationArgs,
    "change_medication_order": ChangeMedicationArgs,
    "update_medication_status": MedicationStatusArgs,
    "add_allergy": AddAllergyArgs,
    "save_clinical_note": ClinicalNoteArgs,
    "analyze_medical_image": ImageAnalysisArgs,
}

# Clinician-facing labels (docs/design.md §12): tool names never reach synthesis.
TOOL_LABELS: dict[str, str] = {
    "search_patient": "Patient Search",
    "get_patient_chart": "Patient Record",
    "check_drug_safety": "Drug Safety Report",
    "check_drug_interactions": "Drug Interaction Check",
    "search_medical_literature": "Medical Literature",
    "find_clinical_trials": "Clinical Trials",
    "get_trial_details": "Clinical Trial Details",
    "prescreen_for_trials": "Trial Prescreen",
    "prescribe_medication": "Prescription",
    "change_medication_order": "Medication Change",
    "update_medication_status": "Medication Status Change",
    "add_allergy": "Allergy Documentation",
    "save_clinical_note": "Clinical Note",
    "analyze_medical_image": "Image Analysis",
}

# Which server answers which tool. analyze_medical_image runs in the agent process because it
# needs the vision model (mmproj), not a data source; prescreen_for_trials too, because it judges
# each eligibility criterion with the language model (appliance.prescreen).
TOOL_SERVERS: dict[str, str] = {
    "search_patient": "ehr",
    "get_patient_chart": "ehr",
    "prescribe_medication": "ehr",
    "change_medication_order": "ehr",
    "update_medication_status": "ehr",
    "add_allergy": "ehr",
    "save_clinical_note": "ehr",
    "check_drug_safety": "knowledge",
    "check_drug_interactions": "knowledge",
    "search_medical_literature": "knowledge",
    "find_clinical_trials": "knowledge",
    "get_trial_details": "knowledge",
    "prescreen_for_trials": "local",
    "analyze_medical_image": "local",
}

WRITE_TOOLS = frozenset({"prescribe_medication", "change_medication_order", "update_medication_status",
                         "add_allergy", "save_clinical_note"})
# The write tools take two parameters more than ARG_SCHEMAS, set by code and never by the model.
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
SIG_TOOLS = frozenset({"prescribe_medication", "change_medication_order"})


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

# The EHR server's one tool that is not the model's (not in ARG_SCHEMAS): the agent's approval
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

# Full descriptions for TOOL_SELECT stage 1 (docs/design.md §12), in our words, argument lists
# matching ARG_SCHEMAS.
FULL_DESCRIPTIONS: dict[str, str] = {
    "check_drug_safety": (
        "check_drug_safety(drug_name) - Look up boxed warnings, contraindications and major "
        "safety alerts for one drug. Use when the clinician asks whether a drug is safe, or "
        "about its warnings or precautions."
    ),
    "check_drug_interactions": (
        "check_drug_interactions(drug_names) - Check two or more drugs against each other for "
        "known interactions, with severity, mechanism and management. Use when the clinician "
        "asks about combining medications."
    ),
    "search_medical_literature": (
        "search_medical_literature(query) - Search the local library of published studies and "
        "reviews. Use when the clinician asks for evidence, studies or research on a topic."
    ),
    "find_clinical_trials": (
        "find_clinical_trials(condition, intervention, eligibility_keywords, status, phase, sex, "
        "patient_age, study_type, page_size) - Find clinical trials for a condition in the local "
        "ClinicalTrials.gov cache; optionally by intervention, words in the eligibility criteria, "
        "status (recruiting by default; active, completed or any), phase, the sex and age of the "
        "patient, and study type. Use when the clinician asks about trials, experimental "
        "treatments or new therapies under study."
    ),
    "get_trial_details": (
        "get_trial_details(nct_id) - Get one trial's details by its NCT id: the full eligibility "
        "criteria split into inclusion and exclusion criteria, ages, sex, arms, interventions and "
        "locations. Use when the clinician asks about a specific trial or its eligibility criteria."
    ),
    "prescreen_for_trials": (
        "prescreen_for_trials(patient_id, condition) - Check a patient's chart against the "
        "eligibility criteria of matching trials in the local cache, criterion by criterion, and "
        "rank the trials: eligible, uncertain (with the questions to resolve), excluded or not "
        "eligible. condition may be null (the patient's problems are searched). Use when the "
        "clinician asks whether a patient is eligible for any trials."
    ),
    "search_patient": (
        "search_patient(name) - Find a patient in the health record by name. Returns matching "
        "patient IDs with birth date and sex. Use when the clinician names a patient."
    ),
    "get_patient_chart": (
        "get_patient_chart(patient_id) - Retrieve a patient's clinical summary: problems, "
        "medications, allergies, labs, vitals and recent notes. Needs a patient ID, not a "
        "name. Use when the clinician wants to review a patient's record."
    ),
    "prescribe_medication": (
        "prescribe_medication(patient_id, medication_name, dosage, frequency, notes) - Create "
        "a new medication order for a patient. Use when the clinician wants to prescribe, "
        "order or start a medication."
    ),
    "change_medication_order": (
        "change_medication_order(patient_id, medication_name, dosage, frequency, reason) - Change "
        "the dose or frequency of a medication the patient already takes (null keeps the current "
        "one); the old order is replaced, not duplicated. Use when the clinician wants to increase, "
        "decrease, titrate or change a current medication."
    ),
    "update_medication_status": (
        "update_medication_status(patient_id, medication_name, action, reason) - Stop "
        "(discontinue), hold, resume or renew a medication order on the patient's chart. Use when "
        "the clinician wants to stop, d/c, hold, resume, restart, continue, refill or renew a "
        "current medication."
    ),
    "add_allergy": (
        "add_allergy(patient_id, substance, reaction, severity) - Record an allergy or adverse "
        "reaction in a patient's record. Use when the clinician wants to document an allergy."
    ),
    "save_clinical_note": (
        "save_clinical_note(patient_id, note_type, note_text) - Save a clinical note (progress, "
        "consult, procedure, discharge, telephone) to a patient's record. Use when the "
        "clinician wants to write or document a note."
    ),
    "analyze_medical_image": (
        "analyze_medical_image(query) - Analyse an attached medical image (X-ray, CT, MRI, "
        "pathology slide) for findings. Use only when an image is attached."
    ),
}
