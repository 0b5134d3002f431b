"""ClinicalTrials.gov API v2 studies -> knowledge-store trials (one study at a time, for
``knowledge.importers.driver``).

Invariant: a study without a ``protocolSection``, a well-formed NCT id or a title is skipped
with its reason; every other field is read with ``knowledge.importers.records``' tolerant readers.
"""

from __future__ import annotations

import re
from typing import Any

from mcp_servers.knowledge.importers.records import (
    KnowledgeImportReport,
    object_of,
    strings,
)
from mcp_servers.knowledge.writes import upsert_trial

_NCT = re.compile(r"^NCT\d{8}$")


def _location(loc: dict) -> str:
    return ", ".join(str(loc[k]) for k in ("facility", "city", "state", "country") if loc.get(k))


def _arm(group: dict) -> dict:
    """One arm group: its label, type (EXPERIMENTAL, PLACEBO_COMPARATOR...), description and
    the interventions it receives."""
    return {"label": group.get("label"), "type": group.get("type"), "description": group.get("description"),
            "interventions": [str(n) for n in group.get("interventionNames") or []]}


def handle_study(db, study: Any, report: KnowledgeImportReport) -> None:
    protocol = study.get("protocolSection") if isinstance(study, dict) else None
    if not isinstance(protocol, dict):
        report.skipped["not a ClinicalTrials.gov v2 study (no protocolSection)"] += 1
        return
    ident = object_of(protocol.get("identificationModule"))
    nct_id = str(ident.get("nctId") or "").strip().upper()
    if not _NCT.match(nct_id):
        report.skipped["missing or malformed NCT id"] += 1
        return
    title = ident.get("briefTitle") or ident.get("officialTitle")
    if not isinstance(title, str) or not title.strip():
        report.skipped["no title"] += 1
        return
    status = object_of(protocol.get("statusModule"))
    design = object_of(protocol.get("designModule"))
    conditions = object_of(protocol.get("conditionsModule"))
    eligibility = object_of(protocol.get("eligibilityModule"))
    arms = object_of(protocol.get("armsInterventionsModule"))
    locations = object_of(protocol.get("contactsLocationsModule")).get("locations")
    trial = {
        "nct_id": nct_id, "title": title, "status": status.get("overallStatus"),
        "phases": strings(design.get("phases")), "study_type": design.get("studyType"),
        "conditions": strings(conditions.get("conditions")), "keywords": strings(conditions.get("keywords")),
        "interventions": [i["name"] for i in arms.get("interventions") or [] if isinstance(i, dict) and i.get("name")],
        "arms": [_arm(g) for g in arms.get("armGroups") or [] if isinstance(g, dict) and g.get("label")],
        "locations": [s for s in (_location(loc) for loc in locations or [] if isinstance(loc, dict)) if s],
        "eligibility_criteria": eligibility.get("eligibilityCriteria"),
        "minimum_age": eligibility.get("minimumAge"), "maximum_age": eligibility.get("maximumAge"),
        "sex": eligibility.get("sex"),
        "last_update": (status.get("lastUpdatePostDateStruct") or {}).get("date"),
        "source": f"ClinicalTrials.gov record {nct_id} (API v2 JSON import)", "demo": False,
    }
    report.count(upsert_trial(db, trial, "import"))
