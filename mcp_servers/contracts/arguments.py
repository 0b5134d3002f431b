"""The agents' tools' arguments: what the model fills and the server checks, one model per tool.

Invariants:
- Every argument field is required; fields that may be empty are nullable, never defaulted,
  because the grammar converter moves defaulted fields to the end (docs/design.md §6).
- Decision-critical fields come first (docs/design.md §6): ``patient_id`` before everything else.
- Extra fields are refused (``ToolArgs``): a server function never receives a field its model
  does not name.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from common.patient_ids import MAX_PATIENT_ID_LENGTH

# Bounded strings keep a weak model from running away inside a JSON string.
Name = Annotated[str, Field(min_length=1, max_length=60)]
ShortText = Annotated[str, Field(min_length=1, max_length=120)]

# Demo IDs are "abc-123", imported (Synthea) ones UUIDs; any FHIR resource id is accepted
# (common.patient_ids) and the record answers "patient_not_found" for one it does not hold.
# Only the length is in the schema: the agent parses the model's arguments against it and the
# grammar takes no patterns, so the character rule is checked by code after the parse (the
# agent's TOOL_EXECUTE and the record), where a malformed ID becomes a question, not a failure.
PatientId = Annotated[str, Field(min_length=1, max_length=MAX_PATIENT_ID_LENGTH)]


class ToolArgs(BaseModel):
    """The base of every tool's argument model: no field beyond those it names."""

    model_config = ConfigDict(extra="forbid")


class DrugSafetyArgs(ToolArgs):
    drug_name: Name


class DrugInteractionArgs(ToolArgs):
    drug_names: list[Name] = Field(min_length=2, max_length=6, description="Two or more drug names")


class LiteratureSearchArgs(ToolArgs):
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


class ClinicalTrialsArgs(ToolArgs):
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


class TrialDetailsArgs(ToolArgs):
    nct_id: NctId


class PrescreenArgs(ToolArgs):
    patient_id: PatientId
    condition: Name | None


class PatientSearchArgs(ToolArgs):
    name: Name


class PatientChartArgs(ToolArgs):
    patient_id: PatientId


class PrescribeMedicationArgs(ToolArgs):
    patient_id: PatientId
    medication_name: Name
    dosage: str = Field(min_length=1, max_length=40)
    frequency: str = Field(min_length=1, max_length=40)
    notes: str | None = Field(max_length=200)


class ChangeMedicationArgs(ToolArgs):
    """A new dose or frequency for an order on the chart: null keeps the order's own. A switch
    names the drug the order is switched to (``new_medication_name``; null: the same drug), with
    that drug's own dose and frequency."""

    patient_id: PatientId
    medication_name: Name
    new_medication_name: Name | None
    dosage: str | None = Field(max_length=40)
    frequency: str | None = Field(max_length=40)
    reason: str | None = Field(max_length=200)


OrderAction = Literal["stop", "hold", "resume", "renew"]


class MedicationStatusArgs(ToolArgs):
    patient_id: PatientId
    medication_name: Name
    action: OrderAction
    reason: str | None = Field(max_length=200)


class AddAllergyArgs(ToolArgs):
    patient_id: PatientId
    substance: Name
    reaction: ShortText
    severity: Literal["mild", "moderate", "severe"] | None


class ClinicalNoteArgs(ToolArgs):
    patient_id: PatientId
    note_type: Literal["progress", "consult", "procedure", "discharge", "telephone", "other"]
    note_text: str = Field(min_length=1, max_length=1500)


class ImageAnalysisArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=120, description="What to look for in the image")


