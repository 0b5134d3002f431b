"""Fixtures for the prescreen tests: the real ClinicalTrials.gov sample imported into a temp
knowledge database through the v2 importer, the real EHR demo database, and a tool box that
answers from both in process (real SQLite, no mocks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.tools.base import ToolOutcome
from mcp_servers.knowledge import server as knowledge
from mcp_servers.knowledge.importers.driver import import_ctgov_studies
from mcp_servers.knowledge.store import ensure_database
from tests.knowledge.knowledge_helpers import call

SAMPLE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "ctgov-sample"
# The sample records carry no structured ages or sex. These are assigned for the filter tests,
# the ages taken from each record's own eligibility text ("18 and over", "aged 18 to 75 years",
# "18 to 99 year old", "above 18 years"); the one FEMALE-only trial is assigned, not real.
ASSIGNED = {
    "NCT00042770": ("18 Years", None, "ALL"),
    "NCT01424176": ("18 Years", "75 Years", "ALL"),
    "NCT02208895": ("18 Years", "99 Years", "ALL"),
    "NCT03272087": ("18 Years", None, "ALL"),
    "NCT04235998": ("18 Years", None, "FEMALE"),
    "NCT04236037": ("6 Months", "17 Years", "ALL"),
}


def sample_studies() -> list[dict]:
    """The shared sample as ClinicalTrials.gov API v2 studies (real text, status, phases)."""
    if not SAMPLE.is_dir():
        pytest.skip(f"the shared ClinicalTrials.gov sample is not at {SAMPLE}")
    criteria = json.loads((SAMPLE / "trial_criteria_cache.json").read_text())
    meta = json.loads((SAMPLE / "eligible_trial_metadata.json").read_text())["trials"]
    studies = []
    for nct in sorted(set(criteria) | set(meta)):
        c, m = criteria.get(nct, {}), meta.get(nct, {})
        minimum, maximum, sex = ASSIGNED.get(nct, (None, None, None))
        studies.append({"protocolSection": {
            "identificationModule": {"nctId": nct, "briefTitle": m.get("title") or c.get("brief_title")},
            "statusModule": {"overallStatus": m.get("status") or c.get("status")},
            "conditionsModule": {"conditions": m.get("conditions") or [], "keywords": m.get("keywords") or []},
            "designModule": {"studyType": m.get("study_type"), "phases": m.get("phase") or []},
            "armsInterventionsModule": {"interventions": [{"name": i} for i in m.get("interventions") or []]},
            "eligibilityModule": {"eligibilityCriteria": c.get("eligibility_criteria"), "sex": sex,
                                  "minimumAge": minimum, "maximumAge": maximum},
        }})
    return studies


@pytest.fixture
def sample_db(tmp_path) -> Path:
    """A knowledge database with the starter content and the sample imported over it."""
    db = tmp_path / "knowledge.sqlite"
    ensure_database(db)
    source = tmp_path / "sample.json"
    source.write_text(json.dumps({"studies": sample_studies()}))
    report = import_ctgov_studies(source, db)
    assert report.skipped == {} and report.records == len(sample_studies())
    knowledge.configure(db)
    yield db
    knowledge.configure(None)


@pytest.fixture
def ehr_db(tmp_path) -> Path:
    from ehr_db.setup import ensure_database as ensure_ehr

    path = tmp_path / "ehr.sqlite"
    ensure_ehr(path)
    return path


class InProcessTools:
    """A ToolBox over the real stores: the chart from the EHR repository, everything else from
    the knowledge server in memory (fastmcp Client). Records every call."""

    def __init__(self, ehr_path: Path):
        self.ehr_path = ehr_path
        self.calls: list[tuple[str, dict]] = []

    def call(self, tool: str, args: dict, deadline: float, *, idempotency_key: str | None = None) -> ToolOutcome:
        self.calls.append((tool, dict(args)))
        if tool == "get_patient_chart":
            from ehr_db.errors import PatientNotFound
            from ehr_db.repository import EhrRepository

            try:
                return ToolOutcome(result=EhrRepository(self.ehr_path).get_patient_chart(args["patient_id"]))
            except PatientNotFound as exc:
                return ToolOutcome(error_type="patient_not_found", message=str(exc))
        result, error = call(tool, args)
        return ToolOutcome(result=result) if error is None else ToolOutcome(error_type=error[0], message=error[1])

    def drug_names(self) -> list[str]:
        return []


@pytest.fixture
def tools(sample_db, ehr_db) -> InProcessTools:
    return InProcessTools(ehr_db)
