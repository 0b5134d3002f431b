"""EHR row -> FHIR R4 resource for the record's export, one pure function per resource type.

Invariants:
- A mapper reads the row as stored and never touches the database; what it cannot state in
  FHIR it leaves out rather than guess (a dose that is not a number and a unit has no
  ``doseQuantity``, a frequency this module does not read has no ``timing.repeat``).
- What the importer reads comes back as it was written (``fhir_mapping``): a patient's
  identity, demographics and MRN; a medication order's name, RxNorm code, status, dose and
  frequency text (the ``SIG_URL`` extension keeps them exactly; ``text``, ``timing``,
  ``asNeeded``, ``doseAndRate``, ``maxDosePerPeriod`` say the same for everyone else), notes,
  author and time; an allergy's substance, code, category, reaction, severity and status; a
  note's type (LOINC), title, text, author and time. Synthetic demo patients carry the HL7
  security label HTEST (test health data), which the importer reads back as demo.
- Every resource keeps its record id and an identifier under ``RESOURCE_ID_SYSTEM``; a patient
  is identified under ``PATIENT_ID_SYSTEM`` by the id this record (and every appliance that
  imported it) knows the patient by.
- Provenance and AuditEvent ids are derived from the record's id and the audit row's seq, so
  the same write exported twice is the same resource (a receiving server updates, never
  duplicates).
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from typing import Any

from ehr_db.codes import LOINC_SYSTEM, RXNORM_SYSTEM
from ehr_db.fhir_mapping import (
    NOTE_TYPES_BY_LOINC,
    SIG_COLUMNS,
    SIG_URL,
    TEST_DATA_LABEL,
)

PATIENT_ID_SYSTEM = "urn:clinical-appliance:patient-id"
RESOURCE_ID_SYSTEM = "urn:clinical-appliance:resource-id"
USER_SYSTEM = "urn:clinical-appliance:user"
AUDIT_ROW_SYSTEM = "urn:clinical-appliance:audit-row"
APPROVAL_URL = "urn:clinical-appliance:fhir:approval"
_NAMESPACE = uuid.UUID("6f1c3a52-8d0e-4c55-9a57-3f0b6f0e2a10")  # this export's uuid5 namespace
_ALLERGY_CLINICAL = "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical"
_PARTICIPANT = "http://terminology.hl7.org/CodeSystem/provenance-participant-type"
_DATA_OPERATION = "http://terminology.hl7.org/CodeSystem/v3-DataOperation"
_INTENTS = ("proposal", "plan", "order", "original-order", "reflex-order", "filler-order", "instance-order", "option")
_LOINC_BY_NOTE_TYPE = {**{v: k for k, v in NOTE_TYPES_BY_LOINC.items()}, "other": "34109-9"}
_NOTE_DISPLAY = {"11506-3": "Progress note", "11488-4": "Consult note", "28570-0": "Procedure note",
                 "18842-5": "Discharge summary", "34748-4": "Telephone encounter Note", "34109-9": "Note"}
ALLERGY_CATEGORIES = ("food", "medication", "environment", "biologic")


def full_url(resource_type: str, resource_id: str) -> str:
    """A bundle entry's fullUrl: the id itself when it is a UUID, else one derived from it."""
    try:
        return f"urn:uuid:{uuid.UUID(resource_id)}"
    except ValueError:
        return f"urn:uuid:{uuid.uuid5(_NAMESPACE, f'{resource_type}/{resource_id}')}"


def derived_id(record_id: str, kind: str, seq: int) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{record_id}/{kind}/{seq}"))


def _meta(demo: bool) -> dict:
    return {"meta": {"security": [dict(TEST_DATA_LABEL)]}} if demo else {}


def _identifier(row_id: str) -> list[dict]:
    return [{"system": RESOURCE_ID_SYSTEM, "value": row_id}]


def _clean(value: Any) -> Any:
    """The resource without empty fields (FHIR allows no empty strings, lists or objects)."""
    if isinstance(value, dict):
        kept = {k: _clean(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, "", [], {})}
    if isinstance(value, list):
        return [v for v in (_clean(v) for v in value) if v not in (None, "", [], {})]
    return value


def patient(row: dict) -> dict:
    identifiers = [{"system": PATIENT_ID_SYSTEM, "value": row["id"]}]
    if row.get("mrn"):
        identifiers.append({"type": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v2-0203",
                                                 "code": "MR"}]}, "value": row["mrn"]})
    return _clean({
        "resourceType": "Patient", "id": row["id"], **_meta(row.get("source") == "demo"),
        "identifier": identifiers,
        "name": [{"use": "official", "family": row.get("family"), "given": [row["given"]] if row.get("given") else []}],
        "gender": row.get("sex"), "birthDate": row.get("birth_date"), "deceasedDateTime": row.get("deceased_date"),
        "telecom": [{"system": "phone", "value": row["phone"]}] if row.get("phone") else [],
        "address": [{"line": [row["address_line"]] if row.get("address_line") else [], "city": row.get("city"),
                     "state": row.get("state"), "postalCode": row.get("postal_code")}],
    })


# -- the sig -----------------------------------------------------------------------------------
_QUANTITY = re.compile(r"(\d+(?:\.\d+)?)\s*([^\d\s].*)")
_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:-|to)\s*(\d+(?:\.\d+)?)\s*([^\d\s].*)")
_PERIOD_UNITS = {"h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "d": "d", "day": "d", "days": "d",
                 "wk": "wk", "week": "wk", "weeks": "wk", "min": "min", "minutes": "min", "month": "mo", "months": "mo"}
_COUNTS = {"once": 1, "twice": 2, "thrice": 3, "three times": 3, "four times": 4, "five times": 5, "six times": 6}
_CODES = {"qd": (1, 1, "d"), "daily": (1, 1, "d"), "bid": (2, 1, "d"), "tid": (3, 1, "d"), "qid": (4, 1, "d"),
          "qod": (1, 2, "d"), "every other day": (1, 2, "d"), "weekly": (1, 1, "wk"), "qw": (1, 1, "wk"),
          "monthly": (1, 1, "mo"), "nightly": (1, 1, "d"), "qhs": (1, 1, "d"), "at bedtime": (1, 1, "d"),
          "qam": (1, 1, "d"), "qpm": (1, 1, "d"), "hourly": (1, 1, "h")}
_AS_NEEDED = re.compile(r"\b(?:prn|as needed)\b(?:\s+for\s+([a-z][a-z ]*))?", re.IGNORECASE)


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def _dose(text: str | None) -> dict | None:
    """doseAndRate from "500 mg" (a quantity) or "1-2 tablets" (a range); None otherwise."""
    if not text:
        return None
    plain = text.strip().replace(",", ".")
    found = _RANGE.fullmatch(plain)
    if found:
        unit = found.group(3).strip()
        return {"doseRange": {"low": {"value": _number(found.group(1)), "unit": unit},
                              "high": {"value": _number(found.group(2)), "unit": unit}}}
    found = _QUANTITY.fullmatch(plain)
    if found:
        return {"doseQuantity": {"value": _number(found.group(1)), "unit": found.group(2).strip()}}
    return None


def _repeat(text: str | None) -> dict | None:
    """timing.repeat from the common frequencies ("twice daily", "BID", "every 8 hours", "q6h")."""
    if not text:
        return None
    words = " ".join(_AS_NEEDED.sub(" ", text.lower().replace(".", "")).split())
    if words in _CODES:
        freq, period, unit = _CODES[words]
        return {"frequency": freq, "period": period, "periodUnit": unit}
    found = re.fullmatch(r"(once|twice|thrice|three times|four times|five times|six times|[1-6]\s*(?:x|times))\s+"
                         r"(?:daily|a day|per day|each day)", words)
    if found:
        count = _COUNTS.get(found.group(1)) or int(found.group(1)[0])
        return {"frequency": count, "period": 1, "periodUnit": "d"}
    found = re.fullmatch(r"(?:every|q)\s*(\d+)\s*([a-z]+)", words)
    if found and found.group(2) in _PERIOD_UNITS:
        return {"frequency": 1, "period": int(found.group(1)), "periodUnit": _PERIOD_UNITS[found.group(2)]}
    return None


def dosage(row: dict, structured: dict) -> dict | None:
    """One dosageInstruction: the sig as text, its parts where known, and the exact texts.
    ``structured``: the order's own sig fields where the record has them (``fhir_export``
    reads them), which win over what is read from the texts."""
    dose, frequency = row.get("dosage"), row.get("frequency")
    if not (dose or frequency or structured):
        return None
    as_needed = structured.get("as_needed")
    reason = structured.get("as_needed_for")
    found = _AS_NEEDED.search(frequency or "")
    if as_needed is None and found:
        as_needed, reason = True, reason or (found.group(1) or "").strip() or None
    repeat = _repeat(frequency) or {}
    if structured.get("duration_days"):
        repeat["boundsDuration"] = {"value": structured["duration_days"], "unit": "days",
                                    "system": "http://unitsofmeasure.org", "code": "d"}
    timing = {"repeat": repeat, "code": {"text": frequency}} if (repeat or frequency) else None
    text = " ".join(t for t in (dose, frequency, structured.get("max_text"), structured.get("duration_text")) if t)
    maximum = structured.get("max_per_period")
    kept = [{"url": c, "valueInteger" if isinstance(row[c], int) else "valueString": row[c]}
            for c in SIG_COLUMNS if row.get(c) is not None]  # as the record holds them, for an appliance
    read = _clean({
        "extension": [{"url": SIG_URL, "extension": [{"url": "dose", "valueString": dose},
                                                     {"url": "frequency", "valueString": frequency}, *kept]}],
        "text": text, "timing": timing,
        **({"asNeededCodeableConcept": {"text": reason}} if as_needed and reason else
           {"asNeededBoolean": True} if as_needed else {}),
        "doseAndRate": [_dose(dose)] if _dose(dose) else [],
        "maxDosePerPeriod": maximum,
    })
    own = _json_object(row.get("dosage_instruction"))  # the order's own structured sig wins
    if own:
        if any(k.startswith("asNeeded") for k in own):
            read = {k: v for k, v in read.items() if not k.startswith("asNeeded")}
        read = _clean({**read, **own, "extension": read["extension"] + list(own.get("extension") or [])})
    return read


def _json_object(text: Any) -> dict | None:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def medication_request(row: dict, subject: str, demo: bool, structured: dict, replaces: str | None) -> dict:
    concept = {"text": row["medication_name"],
               "coding": [{"system": RXNORM_SYSTEM, "code": row["rxnorm_code"]}] if row.get("rxnorm_code") else []}
    return _clean({
        "resourceType": "MedicationRequest", "id": row["id"], **_meta(demo), "identifier": _identifier(row["id"]),
        "status": row["status"], "intent": row["intent"] if row.get("intent") in _INTENTS else "order",
        "medicationCodeableConcept": concept, "subject": {"reference": subject},
        "authoredOn": row["authored_at"], "requester": {"display": row.get("author")},
        "note": [{"text": row["notes"]}] if row.get("notes") else [],
        "dosageInstruction": [dosage(row, structured)],
        "priorPrescription": {"reference": replaces} if replaces else None,
        "statusReason": {"text": row.get("status_reason")},
        "dispenseRequest": _json_object(row.get("dispense_request")),
    })


def allergy(row: dict, subject: str, demo: bool) -> dict:
    code = {"text": row["substance"], "coding": [{"system": row.get("substance_system"),
                                                   "code": row["substance_code"]}] if row.get("substance_code") else []}
    reaction = [{"manifestation": [{"text": row["reaction"]}], "severity": row.get("severity")}] \
        if row.get("reaction") else []
    return _clean({
        "resourceType": "AllergyIntolerance", "id": row["id"], **_meta(demo), "identifier": _identifier(row["id"]),
        "clinicalStatus": {"coding": [{"system": _ALLERGY_CLINICAL, "code": row["clinical_status"]}]},
        "category": [row["category"]] if row.get("category") in ALLERGY_CATEGORIES else [],
        "code": code, "patient": {"reference": subject}, "recordedDate": row["recorded_at"],
        "recorder": {"display": row.get("author")}, "reaction": reaction,
    })


def document(row: dict, subject: str, demo: bool) -> dict:
    loinc = _LOINC_BY_NOTE_TYPE.get(row["note_type"], _LOINC_BY_NOTE_TYPE["other"])
    status = row.get("status") if row.get("status") in ("current", "superseded", "entered-in-error") else "current"
    return _clean({
        "resourceType": "DocumentReference", "id": row["id"], **_meta(demo), "identifier": _identifier(row["id"]),
        "status": status,
        "type": {"coding": [{"system": LOINC_SYSTEM, "code": loinc, "display": _NOTE_DISPLAY[loinc]}],
                 "text": row.get("title")},
        "subject": {"reference": subject}, "date": row["created_at"], "author": [{"display": row.get("author")}],
        "content": [{"attachment": {"contentType": "text/plain; charset=utf-8", "title": row.get("title"),
                                    "data": base64.b64encode(row["text"].encode("utf-8")).decode("ascii")}}],
    })


# -- what each write was -----------------------------------------------------------------------
def approval_extension(approval: dict | None) -> list[dict]:
    """The write's approval: decision, who decided, the override reason, the findings shown."""
    if not isinstance(approval, dict):
        return []
    safety = approval.get("safety") if isinstance(approval.get("safety"), dict) else None
    parts = [{"url": "decision", "valueCode": approval.get("decision") or "approval"},
             {"url": "clinician", "valueString": approval.get("clinician")},
             {"url": "safetyChecked", "valueBoolean": safety is not None}]
    if safety is not None:
        parts.append({"url": "overrideReason", "valueString": safety.get("override_reason")})
        for finding in safety.get("findings") or []:
            if isinstance(finding, dict):
                parts.append({"url": "finding", "extension": [
                    {"url": "severity", "valueCode": finding.get("severity")},
                    {"url": "kind", "valueCode": finding.get("kind")},
                    {"url": "text", "valueString": finding.get("text")}]})
        if safety.get("findings_omitted"):
            parts.append({"url": "findingsNotKept", "valueInteger": int(safety["findings_omitted"])})
    return [_clean({"url": APPROVAL_URL, "extension": parts})]


def _who(actor: str, display: str | None = None) -> dict:
    return {"display": display or actor, "identifier": {"system": USER_SYSTEM, "value": actor}}


def provenance(write: Any, record_id: str, targets: list[str], created: bool) -> dict:
    """``write``: ``fhir_export.Write`` (seq, at, actor, tool, approval)."""
    approval = write.approval if isinstance(write.approval, dict) else {}
    agents = [{"type": {"coding": [{"system": _PARTICIPANT, "code": "author"}]}, "who": _who(write.actor)}]
    clinician = approval.get("clinician")
    if clinician and clinician != write.actor:
        agents.append({"type": {"coding": [{"system": _PARTICIPANT, "code": "verifier"}]},
                       "who": {"display": clinician}})
    return _clean({
        "resourceType": "Provenance", "id": derived_id(record_id, "provenance", write.seq),
        "extension": approval_extension(write.approval),
        "target": [{"reference": t} for t in targets], "recorded": write.at,
        "activity": {"coding": [{"system": _DATA_OPERATION, "code": "CREATE" if created else "UPDATE"}],
                     "text": write.tool},
        "agent": agents,
        "entity": [{"role": "source", "what": {"identifier": {"system": AUDIT_ROW_SYSTEM,
                                                              "value": f"{record_id}:{write.seq}"},
                                               "display": f"audit row seq {write.seq}"}}],
    })


def audit_event(write: Any, record_id: str, targets: list[str], subject: str, created: bool) -> dict:
    details = [{"type": "audit-seq", "valueString": str(write.seq)},
               {"type": "audit-row-hash", "valueString": write.row_hash}, {"type": "tool", "valueString": write.tool}]
    return _clean({
        "resourceType": "AuditEvent", "id": derived_id(record_id, "audit", write.seq),
        "type": {"system": "http://terminology.hl7.org/CodeSystem/audit-event-type", "code": "rest",
                 "display": "RESTful Operation"},
        "subtype": [{"system": "http://hl7.org/fhir/restful-interaction", "code": "create" if created else "update"}],
        "action": "C" if created else "U", "recorded": write.at, "outcome": "0",
        "agent": [{"who": _who(write.actor), "requestor": True}],
        "source": {"observer": {"display": f"clinical appliance, record {record_id[:16]}"}},
        "entity": [{"what": {"reference": t}, "detail": details if n == 0 else []} for n, t in enumerate(targets)]
        + [{"what": {"reference": subject}, "type": {"system": "http://terminology.hl7.org/CodeSystem/audit-entity-type",
                                                     "code": "1", "display": "Person"}}],
    })
