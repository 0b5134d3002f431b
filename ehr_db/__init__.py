"""The local EHR: SQLite schema (FHIR R4 aligned), migrations, repository, importers, demo data."""
