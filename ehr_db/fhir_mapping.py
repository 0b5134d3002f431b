"""FHIR R4 resource -> EHR row, one pure function per supported resource type (Observation:
``fhir_observations``), and the helpers they share for codings, subjects and references.

Invariants:
- A mapper returns a row dict for its table, or raises ``Skip`` with a reason; it never
  touches the database. References are resolved through the ``Resolver`` it is given.
- Codes are kept only from their own system (SNOMED CT for conditions, RxNorm for
  medications, LOINC for observations); other codings leave the code NULL and keep the text.
- Observations (several rows per resource, values in the record's unit) are mapped in
  ``fhir_observations``, on the helpers here.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from common.patient_ids import is_patient_id
from ehr_db.codes import (
    LOINC_SYSTEM,
    RXNORM_SYSTEM,
    SNOMED_SYSTEM,
)
from ehr_db.repository import name_key

CONDITION_STATUSES = ("active", "recurrence", "relapse", "inactive", "remission", "resolved")
MEDICATION_STATUSES = ("active", "on-hold", "cancelled", "completed", "entered-in-error", "stopped",
                       "draft", "unknown")
# LOINC document type -> the EHR's note types; other document types become "other".
NOTE_TYPES_BY_LOINC = {
    "11506-3": "progress",
    "11488-4": "consult",
    "28570-0": "procedure",
    "18842-5": "discharge",
    "34748-4": "telephone",
}
# An appliance's export (``fhir_export_resources``): a dosageInstruction extension holding the
# dose and frequency exactly as written, and the label its synthetic demo patients carry.
SIG_URL = "urn:clinical-appliance:fhir:sig"
# The order columns that extension also carries as the record held them (an order's whole sig and
# its changes); each comes back only when the extension names it.
SIG_COLUMNS = ("as_needed", "as_needed_for", "max_per_period", "duration", "quantity", "refills",
               "dosage_instruction", "dispense_request", "replaces_id", "status_reason", "status_changed_at",
               "status_changed_by")
TEST_DATA_LABEL = {"system": "http://terminology.hl7.org/CodeSystem/v3-ActReason", "code": "HTEST"}


class Skip(Exception):
    """This resource is not imported; the message says why."""


Resolver = Callable[[Any, str], str | None]  # (reference object, target type) -> id or None


def find_coding(concept: dict | None, system: str | None = None) -> dict | None:
    for coding in (concept or {}).get("coding") or []:
        if system is None or coding.get("system") == system:
            return coding
    return None


def concept_text(concept: dict | None) -> str | None:
    if not concept:
        return None
    coding = find_coding(concept)
    return concept.get("text") or (coding or {}).get("display")


def first_of(items: list | None) -> Any:
    return items[0] if items else None


def subject_patient(resource: dict, resolve: Resolver, key: str = "subject") -> str:
    ref = resource.get(key)
    if not ref:
        raise Skip("missing subject")
    pid = resolve(ref, "Patient")
    if pid is None:
        raise Skip("unknown reference")
    return pid


def _fhir_date(value: object) -> bool:
    """A FHIR ``date`` that is a real calendar date: YYYY, YYYY-MM or YYYY-MM-DD."""
    from datetime import date

    if not isinstance(value, str) or len(value) not in (4, 7, 10) or not value.isascii():
        return False
    digits = value.replace("-", "")
    if not digits.isdigit() or value[4:5] not in ("", "-") or value[7:8] not in ("", "-"):
        return False
    try:
        date.fromisoformat((value + "-01-01")[:10])
    except ValueError:
        return False
    return True


def patient_row(r: dict, resolve: Resolver) -> dict:
    if not is_patient_id(r["id"]):  # the agent could never name such a patient
        raise Skip("id is not a FHIR resource id (letters, digits, '-' and '.', up to 64)")
    if r.get("birthDate") is not None and not _fhir_date(r["birthDate"]):
        raise Skip("birthDate is not a date (YYYY, YYYY-MM or YYYY-MM-DD)")
    names = r.get("name") or []
    name = next((n for n in names if n.get("use") == "official"), first_of(names)) or {}
    given = " ".join(name.get("given") or [])
    family = name.get("family") or ""
    if not (given or family):
        raise Skip("missing name")
    mrn = next(
        (i.get("value") for i in r.get("identifier") or []
         if any(c.get("code") == "MR" for c in ((i.get("type") or {}).get("coding") or []))),
        None,
    )
    address = first_of(r.get("address")) or {}
    phone = next((t.get("value") for t in r.get("telecom") or [] if t.get("system") == "phone"), None)
    gender = r.get("gender")
    return {
        "id": r["id"],
        "mrn": mrn,
        "family": family,
        "given": given,
        "name_key": name_key(given, family),
        "birth_date": r.get("birthDate"),
        "sex": gender if gender in ("male", "female", "other", "unknown") else "unknown",
        "deceased_date": r.get("deceasedDateTime"),
        "phone": phone,
        "address_line": first_of(address.get("line")),
        "city": address.get("city"),
        "state": address.get("state"),
        "postal_code": address.get("postalCode"),
        "source": "demo" if _test_data(r) else "fhir",
    }


def _test_data(r: dict) -> bool:
    """Whether the resource is labelled test health data (HTEST), as exported demo patients are."""
    labels = (r.get("meta") or {}).get("security") if isinstance(r.get("meta"), dict) else None
    return any(isinstance(label, dict) and label.get("system") == TEST_DATA_LABEL["system"]
               and label.get("code") == TEST_DATA_LABEL["code"] for label in labels or [])


def _appliance_sig(dosage: dict) -> dict | None:
    """The dose and frequency as an appliance wrote them (its export's ``SIG_URL``), or None."""
    for ext in dosage.get("extension") or []:
        if isinstance(ext, dict) and ext.get("url") == SIG_URL:
            return {e.get("url"): e.get("valueString", e.get("valueInteger")) for e in ext.get("extension") or []
                    if isinstance(e, dict)}
    return None


def encounter_row(r: dict, resolve: Resolver) -> dict:
    pid = subject_patient(r, resolve)
    period = r.get("period") or {}
    if not period.get("start"):
        raise Skip("missing period start")
    klass = r.get("class")
    klass = first_of(klass) if isinstance(klass, list) else klass
    return {
        "id": r["id"],
        "patient_id": pid,
        "status": r.get("status"),
        "class_code": (klass or {}).get("code"),
        "type_display": concept_text(first_of(r.get("type"))),
        "reason_display": concept_text(first_of(r.get("reasonCode"))),
        "period_start": period["start"],
        "period_end": period.get("end"),
        "source": "fhir",
    }


def encounter_ref(r: dict, resolve: Resolver) -> str | None:
    ref = r.get("encounter") or first_of((r.get("context") or {}).get("encounter"))
    return resolve(ref, "Encounter") if ref else None


def condition_row(r: dict, resolve: Resolver) -> dict:
    pid = subject_patient(r, resolve)
    display = concept_text(r.get("code"))
    if not display:
        raise Skip("missing code")
    status = (find_coding(r.get("clinicalStatus")) or {}).get("code")
    if status is None:
        status = "resolved" if r.get("abatementDateTime") else "active"
    if status not in CONDITION_STATUSES:
        raise Skip("unsupported clinical status")
    return {
        "id": r["id"],
        "patient_id": pid,
        "encounter_id": encounter_ref(r, resolve),
        "snomed_code": (find_coding(r.get("code"), SNOMED_SYSTEM) or {}).get("code"),
        "display": (find_coding(r.get("code"), SNOMED_SYSTEM) or {}).get("display") or display,
        "clinical_status": status,
        "verification_status": (find_coding(r.get("verificationStatus")) or {}).get("code"),
        "onset_date": r.get("onsetDateTime") or (r.get("onsetPeriod") or {}).get("start"),
        "abatement_date": r.get("abatementDateTime"),
        "recorded_date": r.get("recordedDate"),
        "source": "fhir",
    }


def _quantity(q: dict | None) -> str | None:
    if not q or q.get("value") is None:
        return None
    value = f"{q['value']:g}" if isinstance(q["value"], (int, float)) else str(q["value"])
    unit = q.get("unit") or q.get("code")
    if unit:
        return f"{value} {unit}"
    return f"{value} dose" if value in ("1", "1.0") else f"{value} doses"


_PERIOD_UNITS = {"s": "second", "min": "minute", "h": "hour", "d": "day", "wk": "week", "mo": "month", "a": "year"}
_TIMES = {1: "once", 2: "twice", 3: "three times", 4: "four times"}


def _frequency(dosage: dict) -> str | None:
    repeat = (dosage.get("timing") or {}).get("repeat") or {}
    prn = bool(dosage.get("asNeededBoolean") or dosage.get("asNeededCodeableConcept"))
    freq, period, unit = repeat.get("frequency"), repeat.get("period"), repeat.get("periodUnit")
    text = None
    if freq and period and unit in _PERIOD_UNITS:
        word = _PERIOD_UNITS[unit]
        if period == 1:
            text = f"{_TIMES.get(int(freq), f'{int(freq)} times')} {'daily' if unit == 'd' else 'per ' + word}"
        elif int(freq) == 1:
            text = f"every {period:g} {word}s"
        else:
            text = f"{int(freq)} times every {period:g} {word}s"
    if prn:
        text = f"{text} as needed" if text else "as needed"
    return text


def medication_row(r: dict, resolve: Resolver, medications: dict[str, dict]) -> dict:
    pid = subject_patient(r, resolve)
    concept = r.get("medicationCodeableConcept")
    if concept is None and r.get("medicationReference"):
        med = medications.get(r["medicationReference"].get("reference", ""))
        concept = (med or {}).get("code")
    name = concept_text(concept)
    if not name:
        raise Skip("missing medication")
    if not r.get("authoredOn"):
        raise Skip("missing authoredOn")
    dosage = first_of(r.get("dosageInstruction")) or {}
    dose = first_of(dosage.get("doseAndRate")) or {}
    sig = _appliance_sig(dosage)  # the sig's own text is then not a note
    notes = ([dosage.get("text")] if sig is None else []) + [n.get("text") for n in r.get("note") or []]
    status = r.get("status")
    return {
        "id": r["id"],
        "patient_id": pid,
        "encounter_id": encounter_ref(r, resolve),
        "rxnorm_code": (find_coding(concept, RXNORM_SYSTEM) or {}).get("code"),
        "medication_name": name,
        "dosage": _quantity(dose.get("doseQuantity")) if sig is None else sig.get("dose"),
        "frequency": _frequency(dosage) if sig is None else sig.get("frequency"),
        "status": status if status in MEDICATION_STATUSES else "unknown",
        "intent": r.get("intent") or "order",
        "notes": " ".join(n for n in notes if n) or None,
        "author": (r.get("requester") or {}).get("display"),
        "authored_at": r["authoredOn"],
        "source": "fhir",
        **{k: v for k, v in (sig or {}).items() if k in SIG_COLUMNS},
    }


def allergy_row(r: dict, resolve: Resolver) -> dict:
    pid = subject_patient(r, resolve, key="patient")
    substance = concept_text(r.get("code"))
    if not substance:
        raise Skip("missing substance")
    recorded = r.get("recordedDate") or r.get("onsetDateTime")
    if not recorded:
        raise Skip("missing recordedDate")
    coding = find_coding(r.get("code")) or {}
    reaction = first_of(r.get("reaction")) or {}
    manifestations = [concept_text(m) for m in reaction.get("manifestation") or []]
    severity = reaction.get("severity")
    status = (find_coding(r.get("clinicalStatus")) or {}).get("code") or "active"
    return {
        "id": r["id"],
        "patient_id": pid,
        "substance": substance,
        "substance_code": coding.get("code"),
        "substance_system": coding.get("system"),
        "category": first_of(r.get("category")),
        "reaction": ", ".join(m for m in manifestations if m) or None,
        "severity": severity if severity in ("mild", "moderate", "severe") else None,
        "clinical_status": status if status in ("active", "inactive", "resolved") else "active",
        "author": (r.get("recorder") or {}).get("display"),
        "recorded_at": recorded,
        "source": "fhir",
    }


def document_row(r: dict, resolve: Resolver) -> dict:
    if r.get("status") == "entered-in-error":
        raise Skip("entered in error")
    pid = subject_patient(r, resolve)
    text = None
    for content in r.get("content") or []:
        attachment = content.get("attachment") or {}
        if attachment.get("data") and (attachment.get("contentType") or "text/plain").startswith("text/"):
            try:
                text = base64.b64decode(attachment["data"], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise Skip("unreadable attachment") from None
            break
    if not text or not text.strip():
        raise Skip("no inline text")
    created = r.get("date") or ((r.get("context") or {}).get("period") or {}).get("start")
    if not created:
        raise Skip("missing date")
    loinc = (find_coding(r.get("type"), LOINC_SYSTEM) or {}).get("code")
    return {
        "id": r["id"],
        "patient_id": pid,
        "encounter_id": encounter_ref(r, resolve),
        "note_type": NOTE_TYPES_BY_LOINC.get(loinc, "other"),
        "title": concept_text(r.get("type")),
        "text": text.strip(),
        "author": (first_of(r.get("author")) or {}).get("display"),
        "created_at": created,
        # Synthea marks its notes "superseded" although no newer version exists; every
        # imported note that was not entered in error is shown as current.
        "status": "current",
        "source": "fhir",
    }
