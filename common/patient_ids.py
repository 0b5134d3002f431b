"""What a patient ID is, for every layer that checks one: the tool contract's length
(``mcp_servers.contracts.PatientId``), the agent's argument check
(``appliance.agent.nodes.tool_execute.validate_args``), the record's read and write checks
(``ehr_db.validation.patient_id``, behind the EHR server), the FHIR importer and the line
session's ``/patient ID``.

Invariant: a patient ID is a FHIR resource id: 1 to 64 characters, each a letter, a digit,
``-`` or ``.`` (FHIR R4 "id" datatype). That covers the demo form (``abc-123``, ``pat-78234``),
imported UUIDs and MRN-like digit strings. Whether the record holds the patient is the record's
answer ("patient_not_found"), never this check's. Recognising an ID in free text is narrower
and is the agent's (``appliance.agent.reading.patient_refs``).
"""

from __future__ import annotations

import re

MAX_PATIENT_ID_LENGTH = 64
PATIENT_ID_RE = re.compile(r"[A-Za-z0-9\-.]{1,64}")


def is_patient_id(value: object) -> bool:
    """Whether ``value`` (already stripped) is a well-formed patient ID."""
    return isinstance(value, str) and PATIENT_ID_RE.fullmatch(value) is not None
