"""A scripted clinic afternoon for the export tests: new orders (one as needed with a maximum),
one changed, one stopped, one written over a blocking safety finding, an allergy and a note,
each through the record's own write paths with the approval the agent's code sends."""

from __future__ import annotations

import json
from pathlib import Path

from ehr_db import order_changes, signing
from ehr_db.repository import EhrRepository
from ehr_db.setup import ensure_database

CLINICIAN = "Dr. Ada Okafor"
AUTHOR = "ada"


def safety(drug: str, findings: list[dict], reason: str | None = None) -> dict:
    return {"version": 1, "drug": drug, "resolved": [drug], "ingredients": [drug], "blocking": reason is not None,
            "unchecked": False, "complete": True, "checked": {"interactions": True},
            "findings": findings, "override_reason": reason}


def approved(drug: str = "none") -> dict:
    return {"decision": "approval", "clinician": CLINICIAN, "safety": safety(drug, [])}


OVERRIDE_REASON = "short course; INR checked tomorrow"
OVERRIDE = {"decision": "override", "clinician": CLINICIAN, "safety": safety("ibuprofen", [
    {"kind": "interaction", "severity": "high", "text": "warfarin and ibuprofen: bleeding risk",
     "evidence": {}, "source": "curated interactions"}], OVERRIDE_REASON)}


def make_home(home: Path) -> Path:
    """A data home's EHR (demo patients) and export key, as `appliance init` makes them."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "ehr.sqlite"
    ensure_database(path)
    signing.ensure_key(home / "export-signing.key", home / "export-signing.pub")
    return path


def afternoon(path: Path) -> dict[str, str]:
    """The afternoon's writes; returns the record ids they made, by name."""
    repo = EhrRepository(path)
    ids = {}
    ids["prn"] = repo.prescribe_medication(
        "abc-123", "acetaminophen", "650 mg", "every 6 hours as needed", author=AUTHOR,
        approval=approved("acetaminophen"),
        sig={"as_needed": True, "as_needed_for": "pain", "max_per_period": "max 4 g/day", "duration": "x 7 days"})
    changed = order_changes.change_order(repo, order_changes.TOOL_CHANGE, "abc-123", "metformin", "change",
                                         author=AUTHOR, dosage="1000 mg", frequency="twice daily",
                                         approval=approved("metformin"))
    ids["changed_new"], ids["changed_old"] = changed["id"], changed["replaces"]
    ids["stopped"] = order_changes.change_order(repo, order_changes.TOOL_STATUS, "pat-005", "warfarin", "stop",
                                                author=AUTHOR, reason="bleeding", approval=approved())["id"]
    ids["override"] = repo.prescribe_medication("pat-005", "ibuprofen", "400 mg", "every 8 hours", author=AUTHOR,
                                                approval=OVERRIDE)
    ids["allergy"] = repo.add_allergy("abc-123", "latex", "hives", "moderate", author=AUTHOR, approval=approved())
    ids["note"] = repo.save_clinical_note("abc-123", "telephone", "Called about the new order.\nNo questions.",
                                          author=AUTHOR, approval=approved())
    return ids


def bundle(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def of_type(data: dict, resource_type: str) -> list[dict]:
    return [e["resource"] for e in data["entry"] if e["resource"]["resourceType"] == resource_type]


def approval_parts(provenance: dict) -> dict:
    """The approval extension's parts of a Provenance: url -> list of values."""
    parts: dict[str, list] = {}
    for ext in provenance.get("extension") or []:
        for part in ext.get("extension") or []:
            value = next((v for k, v in part.items() if k.startswith("value")), part.get("extension"))
            parts.setdefault(part["url"], []).append(value)
    return parts
