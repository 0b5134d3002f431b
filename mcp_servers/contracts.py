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
  with ``<error_type>`` from ``ERROR_TYPES``; ``parse_tool_error`` reads that back. The text is
  clinician-safe and never carries patient data beyond what the caller sent.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

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


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DrugSafetyArgs(_Args):
    drug_name: Name


class DrugInteractionArgs(_Args):
    drug_names: list[Name] = Field(min_length=2, max_length=6, description="Two or more drug names")


class LiteratureSearchArgs(_Args):
    query: str = Field(min_length=1, max_length=120, description="Search query for medical literature")


class ClinicalTrialsArgs(_Args):
    condition: Name
    status: Literal["recruiting", "active", "completed"] | None


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
    "search_patient",
    "get_patient_chart",
    "prescribe_medication",
    "add_allergy",
    "save_clinical_note",
    "analyze_medical_image",
]

ARG_SCHEMAS: dict[str, type[BaseModel]] = {
    "check_drug_safety": DrugSafetyArgs,
    "check_drug_interactions": DrugInteractionArgs,
    "search_medical_literature": LiteratureSearchArgs,
    "find_clinical_trials": ClinicalTrialsArgs,
    "search_patient": PatientSearchArgs,
    "get_patient_chart": PatientChartArgs,
    "prescribe_medication": PrescribeMedicationArgs,
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
    "prescribe_medication": "Prescription",
    "add_allergy": "Allergy Documentation",
    "save_clinical_note": "Clinical Note",
    "analyze_medical_image": "Image Analysis",
}

# Which server answers which tool. analyze_medical_image runs in the agent process because it
# needs the vision model (mmproj), not a data source.
TOOL_SERVERS: dict[str, str] = {
    "search_patient": "ehr",
    "get_patient_chart": "ehr",
    "prescribe_medication": "ehr",
    "add_allergy": "ehr",
    "save_clinical_note": "ehr",
    "check_drug_safety": "knowledge",
    "check_drug_interactions": "knowledge",
    "search_medical_literature": "knowledge",
    "find_clinical_trials": "knowledge",
    "analyze_medical_image": "local",
}

WRITE_TOOLS = frozenset({"prescribe_medication", "add_allergy", "save_clinical_note"})

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
        "find_clinical_trials(condition, status) - Find clinical trials for a condition, "
        "optionally only recruiting, active or completed ones. Use when the clinician asks "
        "about trials, experimental treatments or new therapies under study."
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

ErrorType = Literal[
    "not_found",
    "patient_not_found",
    "drug_not_in_database",
    "multiple_patient_matches",
    "missing_required_args",
    "ambiguous_drug_name",
    "invalid_args",
    "timeout",
    "rate_limit",
    "service_unavailable",
    "server_error",
    "invalid_response",
    "rejected_by_user",
]
ERROR_TYPES: frozenset[str] = frozenset(ErrorType.__args__)  # type: ignore[attr-defined]


def tool_error_message(error_type: str, text: str) -> str:
    """Build the message of a ToolError so the client can recover the error type."""
    if error_type not in ERROR_TYPES:
        raise ValueError(f"unknown error type {error_type!r}")
    return f"{error_type}: {text}"


def parse_tool_error(message: str) -> tuple[str, str]:
    """Split a ToolError message into (error_type, text); unknown shapes are server_error."""
    head, sep, rest = message.partition(": ")
    if sep and head in ERROR_TYPES:
        return head, rest
    return "server_error", message


# -- drugs the knowledge server does not hold --------------------------------------------------
# The caveat that goes with them, word for word from the server to the clinician's answer:
# absence from a reference never means a drug or a combination is safe.
NOT_IN_DATABASE_CAVEATS: dict[str, str] = {
    "check_drug_safety": "this does not mean it is safe",
    "check_drug_interactions": "this does not mean the combination is safe",
}
_NOT_FOUND = " not found in the local drug database"


def drugs_not_found_text(tool: str, names: list[str]) -> str:
    """The server's text for drugs it does not hold: each name quoted, then the tool's caveat.
    ``drugs_not_found`` reads the names back."""
    quoted = ", ".join(f"'{n}'" for n in names)
    what = "interaction" if tool == "check_drug_interactions" else "safety"
    them = "it" if len(names) == 1 else "them"
    caveat = NOT_IN_DATABASE_CAVEATS.get(tool, NOT_IN_DATABASE_CAVEATS["check_drug_safety"])
    return f"{quoted}{_NOT_FOUND}; no {what} information is available for {them} here ({caveat})"


def drugs_not_found(text: str) -> tuple[str, ...]:
    """The drug names of a ``drugs_not_found_text``, in order; empty for any other text."""
    head, sep, _ = text.partition(_NOT_FOUND)
    if not sep:
        return ()
    return tuple(re.findall(r"'(.*?)'(?=, '|$)", head))
