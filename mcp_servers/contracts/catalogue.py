"""The agent's tools, one record each (docs/design.md §12), in the order the tables list them.

Invariants:
- Each tool's properties are written here and nowhere else; its server function takes the
  record's argument model (``mcp_servers.serving.serves``), and the agent reads the record
  through the tables of ``mcp_servers.contracts``.
- Descriptions are ours, for TOOL_SELECT stage 1: what the tool does and when a clinician would
  want it; the argument list in front of each is read off the argument model (``Tool.signature``).
- analyze_medical_image runs in the agent process because it needs the vision model (mmproj),
  not a data source; prescreen_for_trials too, because it judges each eligibility criterion with
  the language model (appliance.prescreen).
"""

from __future__ import annotations

from mcp_servers.contracts.arguments import (
    AddAllergyArgs,
    ChangeMedicationArgs,
    ClinicalNoteArgs,
    ClinicalTrialsArgs,
    DrugInteractionArgs,
    DrugSafetyArgs,
    ImageAnalysisArgs,
    LiteratureSearchArgs,
    MedicationStatusArgs,
    PatientChartArgs,
    PatientSearchArgs,
    PrescreenArgs,
    PrescribeMedicationArgs,
    TrialDetailsArgs,
)
from mcp_servers.contracts.tool import Tool, register

# The writes' names, for the agent code that reads a request to change the record.
PRESCRIBE, CHANGE, STATUS = "prescribe_medication", "change_medication_order", "update_medication_status"
ALLERGY, NOTE = "add_allergy", "save_clinical_note"

register(Tool(
    "check_drug_safety", "knowledge", DrugSafetyArgs, "Drug Safety Report",
    "Look up boxed warnings, contraindications and major safety alerts for one drug. Use when the "
    "clinician asks whether a drug is safe, or about its warnings or precautions.",
    "Boxed warnings for amiodarone?", brief=True, idempotent=True,
))
register(Tool(
    "check_drug_interactions", "knowledge", DrugInteractionArgs, "Drug Interaction Check",
    "Check two or more drugs against each other for known interactions, with severity, mechanism "
    "and management. Use when the clinician asks about combining medications.",
    "Can I give clarithromycin to someone on simvastatin?", idempotent=True,
))
register(Tool(
    "search_medical_literature", "knowledge", LiteratureSearchArgs, "Medical Literature",
    "Search the local library of published studies and reviews. Use when the clinician asks for "
    "evidence, studies or research on a topic.",
    "Evidence for SGLT2 inhibitors in heart failure?", brief=True, idempotent=True,
))
register(Tool(
    "find_clinical_trials", "knowledge", ClinicalTrialsArgs, "Clinical Trials",
    "Find clinical trials for a condition in the local ClinicalTrials.gov cache; optionally by "
    "intervention, words in the eligibility criteria, status (recruiting by default; active, "
    "completed or any), phase, the sex and age of the patient, and study type. Use when the "
    "clinician asks about trials, experimental treatments or new therapies under study.",
    "Recruiting trials for mesothelioma?", idempotent=True, nulls_optional=True,
))
register(Tool(
    "get_trial_details", "knowledge", TrialDetailsArgs, "Clinical Trial Details",
    "Get one trial's details by its NCT id: the full eligibility criteria split into inclusion and "
    "exclusion criteria, ages, sex, arms, interventions and locations. Use when the clinician asks "
    "about a specific trial or its eligibility criteria.",
    "Eligibility criteria of NCT02300883?", idempotent=True,
))
register(Tool(
    "prescreen_for_trials", "local", PrescreenArgs, "Trial Prescreen",
    "Check a patient's chart against the eligibility criteria of matching trials in the local "
    "cache, criterion by criterion, and rank the trials: eligible, uncertain (with the questions to "
    "resolve), excluded or not eligible. condition may be null (the patient's problems are "
    "searched). Use when the clinician asks whether a patient is eligible for any trials.",
    "Is this patient eligible for any trials?",
))
register(Tool(
    "search_patient", "ehr", PatientSearchArgs, "Patient Search",
    "Find a patient in the health record by name. Returns matching patient IDs with birth date and "
    "sex. Use when the clinician names a patient.",
    "Find the patient Ana Lopez.",
))
register(Tool(
    "get_patient_chart", "ehr", PatientChartArgs, "Patient Record",
    "Retrieve a patient's clinical summary: problems, medications, allergies, labs, vitals and "
    "recent notes. Needs a patient ID, not a name. Use when the clinician wants to review a "
    "patient's record.",
    "Show me the chart of pat-004.",
))
register(Tool(
    PRESCRIBE, "ehr", PrescribeMedicationArgs, "Prescription",
    "Create a new medication order for a patient. Use when the clinician wants to prescribe, order "
    "or start a medication.",
    "Start lisinopril 10 mg daily for pat-002.",
    approval="clinician_after_safety", sig=True, said_fields=("medication_name", "dosage", "frequency"),
    free_text_fields=("notes",),
))
register(Tool(
    CHANGE, "ehr", ChangeMedicationArgs, "Medication Change",
    "Change the dose or frequency of a medication the patient already takes (null keeps the "
    "current one); the old order is replaced, not duplicated. Use when the clinician wants to "
    "increase, decrease, titrate or change a current medication, or switch it to another drug "
    "(new_medication_name, with that drug's dose and frequency; null when the drug stays).",
    "Increase metformin to 1000 mg twice daily for pat-004.",
    approval="clinician_after_safety", sig=True,
    said_fields=("medication_name", "new_medication_name", "dosage", "frequency"),
    keeps_when_null=("new_medication_name", "dosage", "frequency"), free_text_fields=("reason",),
))
register(Tool(
    STATUS, "ehr", MedicationStatusArgs, "Medication Status Change",
    "Stop (discontinue), hold, resume or renew a medication order on the patient's chart. Use when "
    "the clinician wants to stop, d/c, hold, resume, restart, continue, refill or renew a current "
    "medication.",
    "Stop the warfarin for pat-005: bleeding.",
    approval="clinician_after_safety", said_fields=("medication_name",), free_text_fields=("reason",),
))
register(Tool(
    ALLERGY, "ehr", AddAllergyArgs, "Allergy Documentation",
    "Record an allergy or adverse reaction in a patient's record. Use when the clinician wants to "
    "document an allergy.",
    "Add a sulfa allergy with rash for pat-003.",
    approval="clinician", said_fields=("substance", "reaction"),
))
register(Tool(
    NOTE, "ehr", ClinicalNoteArgs, "Clinical Note",
    "Save a clinical note (progress, consult, procedure, discharge, telephone) to a patient's "
    "record. Use when the clinician wants to write or document a note.",
    "Save a note for pat-001: doing well.",
    approval="clinician", free_text_fields=("note_text",), dictated=True,
))
register(Tool(
    "analyze_medical_image", "local", ImageAnalysisArgs, "Image Analysis",
    "Analyse an attached medical image (X-ray, CT, MRI, pathology slide) for findings. Use only "
    "when an image is attached.",
    "What does this chest X-ray show?",
))
