"""The EHR package's exceptions.

Invariant: messages name fields, tables or files, never patient data, so every edge (MCP
ToolError, CLI message) may show them as they are.
"""

from __future__ import annotations


class EhrError(Exception):
    """Base of every expected failure of the local EHR."""


class DatabaseNotReady(EhrError):
    """The EHR database file does not exist yet (``appliance init`` creates it)."""


class PatientNotFound(EhrError):
    """No patient has the given ID."""

    def __init__(self, patient_id: str):
        super().__init__("no patient has this ID")
        self.patient_id = patient_id


class InvalidField(EhrError):
    """A write was rejected: one field is missing, empty or implausible."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class BundleError(EhrError):
    """A FHIR file cannot be imported: unreadable, not JSON, or not a Bundle."""


class ImportNeedsAcceptance(BundleError):
    """An import would change what clinicians rely on (identity, allergies, active medications,
    the safety gate's labs and conditions);
    nothing was written. ``differences`` lists each change (``ehr_db.import_checks``)."""

    def __init__(self, source: str, differences: list):
        super().__init__(f"importing {source} would change {len(differences)} thing(s) clinicians rely on "
                         "(a patient's identity, an allergy, an active medication, a lab or condition the safety "
                         "gate reads); nothing was imported. Check "
                         "the differences, then run again with --accept-changes to apply them")
        self.differences = differences


class OrderNotFound(EhrError):
    """No order of the named drug is in a status the change applies to."""

    def __init__(self, medication_name: str, statuses: tuple[str, ...]):
        super().__init__(f"no {' or '.join(statuses)} order of this drug")
        self.medication_name = medication_name
        self.statuses = statuses


class AmbiguousOrder(EhrError):
    """Two or more orders of the named drug match a change; the change must name one (order_id)."""

    def __init__(self, medication_name: str, count: int):
        super().__init__(f"{count} orders of this drug match")
        self.medication_name = medication_name
        self.count = count
