"""JSON shapes of the FHIR fields the importer reads, checked before a resource is mapped.

Invariants:
- ``shape_problem`` names the first field of a resource whose JSON type is not what FHIR R4
  says ("Patient.name is not a list", "Condition.code is not an object"); the importer skips
  that resource with the problem as its reason, so a malformed bundle is reported, never a
  traceback, and never stored half-understood (a list where a date belongs).
- Only the fields ``fhir_mapping`` reads are described; anything else in a resource is ignored.
- ``row_problem`` is the last guard: every column value of a mapped row is a single value.
"""

from __future__ import annotations

from typing import Any

# Kinds: "str", "num", "bool", "object", "list", and composite FHIR types checked one level in.
_CODEABLE = {"coding": "list[object]", "text": "str"}
_REFERENCE = {"reference": "str", "display": "str"}
_NAME = {"use": "str", "family": "str", "given": "list[str]"}
_COMPOSITES: dict[str, dict[str, str]] = {
    "CodeableConcept": _CODEABLE, "Reference": _REFERENCE, "HumanName": _NAME,
    "Period": {"start": "str", "end": "str"},
}

_COMMON = {"id": "str", "subject": "Reference", "encounter": "Reference", "status": "str"}
SHAPES: dict[str, dict[str, str]] = {
    "Patient": {"id": "str", "name": "list[HumanName]", "identifier": "list[object]", "birthDate": "str",
                "gender": "str", "deceasedDateTime": "str", "telecom": "list[object]", "address": "list[object]"},
    "Encounter": {**_COMMON, "period": "Period", "type": "list[CodeableConcept]",
                  "reasonCode": "list[CodeableConcept]"},
    "Condition": {**_COMMON, "code": "CodeableConcept", "clinicalStatus": "CodeableConcept",
                  "verificationStatus": "CodeableConcept", "onsetDateTime": "str", "onsetPeriod": "Period",
                  "abatementDateTime": "str", "recordedDate": "str"},
    "MedicationRequest": {**_COMMON, "medicationCodeableConcept": "CodeableConcept",
                          "medicationReference": "Reference", "authoredOn": "str",
                          "dosageInstruction": "list[object]", "note": "list[object]", "requester": "Reference",
                          "intent": "str"},
    "AllergyIntolerance": {"id": "str", "patient": "Reference", "code": "CodeableConcept",
                           "clinicalStatus": "CodeableConcept", "recordedDate": "str", "onsetDateTime": "str",
                           "reaction": "list[object]", "category": "list[str]", "recorder": "Reference"},
    "Observation": {**_COMMON, "category": "list[CodeableConcept]", "code": "CodeableConcept",
                    "component": "list[object]", "valueQuantity": "object", "valueCodeableConcept": "CodeableConcept",
                    "referenceRange": "list[object]", "interpretation": "list[CodeableConcept]",
                    "effectiveDateTime": "str", "effectivePeriod": "Period", "issued": "str"},
    "DocumentReference": {**_COMMON, "type": "CodeableConcept", "content": "list[object]", "author": "list[Reference]",
                          "date": "str", "context": "object"},
}
_PYTHON = {"str": str, "object": dict, "list": list, "num": (int, float), "bool": bool}
_WORDS = {"str": "a string", "object": "an object", "list": "a list"}


def _problem(value: Any, kind: str, where: str) -> str | None:
    if kind.startswith("list[") and kind.endswith("]"):
        if not isinstance(value, list):
            return f"{where} is not a list"
        inner = kind[5:-1]
        for n, item in enumerate(value):
            found = _problem(item, inner, f"{where}[{n}]")
            if found:
                return found
        return None
    if kind in _COMPOSITES:
        if not isinstance(value, dict):
            return f"{where} is not an object"
        for key, sub in _COMPOSITES[kind].items():
            if value.get(key) is not None:
                found = _problem(value[key], sub, f"{where}.{key}")
                if found:
                    return found
        return None
    if isinstance(value, bool) and kind != "bool":
        return f"{where} is not {_WORDS.get(kind, kind)}"
    if not isinstance(value, _PYTHON[kind]):
        return f"{where} is not {_WORDS.get(kind, kind)}"
    return None


def shape_problem(resource_type: str, resource: dict) -> str | None:
    """The first field of ``resource`` with the wrong JSON type, as "Type.field is not ...", or None."""
    for key, kind in SHAPES.get(resource_type, {}).items():
        value = resource.get(key)
        if value is not None:
            found = _problem(value, kind, f"{resource_type}.{key}")
            if found:
                return found
    return None


def row_problem(resource_type: str, row: dict) -> str | None:
    """A column of a mapped row that holds a list or an object instead of one value."""
    for column, value in row.items():
        if isinstance(value, (list, dict)):
            return f"{resource_type} gives {column} a {'list' if isinstance(value, list) else 'object'}"
    return None
