"""The extraction package's exceptions; the CLI turns each into one line and exit code 2.
Messages name the file and what is wrong with it, never its content."""

from __future__ import annotations

from appliance.errors import ApplianceError


class ExtractionError(ApplianceError):
    """Criteria extraction could not run."""


class DocumentError(ExtractionError):
    """A protocol file cannot be read as a document: missing, empty, encrypted, image-only,
    corrupt, not UTF-8, or not a ClinicalTrials.gov record."""
