"""Small charts and lookups for the safety-gate unit tests."""

from __future__ import annotations

import asyncio

from appliance.tools.base import ToolOutcome
from ehr_db.codes import rxnorm_for
from mcp_servers.contracts import parse_tool_error


def make_chart(age: int | None = 50, *, problems=(), meds=(), allergies=(), labs=(), sex: str = "female") -> dict:
    """A chart shaped like ``get_patient_chart``'s result. ``problems``: (display, snomed) pairs;
    ``meds``: names (or dicts); ``allergies``: (substance, reaction, severity) triples; ``labs``:
    (loinc, display, value) triples."""
    return {
        "patient": {"patient_id": "t-1", "name": "Test Patient", "birth_date": None, "age": age, "sex": sex},
        "synthetic_demo_record": False,
        "active_problems": [{"display": d, "snomed_code": c, "clinical_status": "active"} for d, c in problems],
        "medications": [
            m if isinstance(m, dict) else
            {"medication_name": m, "rxnorm_code": rxnorm_for(m), "status": "active", "dosage": None, "frequency": None}
            for m in meds
        ],
        "allergies": [
            {"substance": s, "substance_code": rxnorm_for(s), "category": "medication", "reaction": r, "severity": sev}
            for s, r, sev in allergies
        ],
        "labs": [
            {"display": d, "loinc_code": code, "value": v, "unit": "mL/min/1.73m2", "effective_at": "2026-10-01"}
            for code, d, v in labs
        ],
        "vitals": [],
        "recent_notes": [],
    }


def codes(report) -> set[tuple[str, str]]:
    """(kind, severity) of every finding above info level."""
    return {(f.kind, f.severity) for f in report.findings if f.severity != "info"}


class FakeKnowledge:
    """A scripted KnowledgeLookup: ``safety`` maps names to results (None: unknown; an exception
    instance: raised); interactions come from ``rows`` keyed by sorted generic pair."""

    def __init__(self, safety: dict | None = None, rows: dict | None = None, generics: dict | None = None):
        self.safety = safety or {}
        self.rows = rows or {}
        self.generics = generics or {}  # name (lower case) -> generic, for interactions
        self.calls: list[tuple[str, object]] = []

    def drug_safety(self, name: str):
        self.calls.append(("drug_safety", name))
        value = self.safety.get(name.lower())
        if isinstance(value, Exception):
            raise value
        return value

    def interactions(self, names: list[str]) -> dict:
        self.calls.append(("interactions", list(names)))
        checked = [{"name": n, "generic_name": self.generics[n.lower()]} for n in names if n.lower() in self.generics]
        generics = sorted({c["generic_name"] for c in checked})
        found = [
            {"drugs": [a, b], "severity": self.rows[(a, b)], "mechanism": f"{a} with {b}", "management": "",
             "source": "test", "demo_content": True}
            for i, a in enumerate(generics) for b in generics[i + 1:] if (a, b) in self.rows
        ]
        return {"drugs_checked": checked, "not_recognised": [n for n in names if n.lower() not in self.generics],
                "ambiguous": {}, "same_drug_given_twice": [], "pairs_checked": 0, "interactions": found,
                "label_mentions": [], "note": ""}


def safety_of(generic: str, **fields) -> dict:
    return {"drug": generic, "matched_name": generic, "brand_names": [], "drug_class": fields.get("drug_class"),
            "has_boxed_warning": bool(fields.get("boxed_warning")), "boxed_warning": fields.get("boxed_warning"),
            "contraindications": fields.get("contraindications", []), "major_warnings": fields.get("major_warnings", []),
            "clipped": False, "source": "test", "demo_content": True}


class InMemoryToolBox:
    """The agent's ToolBox shape over one real MCP server module (``mcp_servers.knowledge.server``,
    ``mcp_servers.umls.server``), in memory."""

    def __init__(self, server):
        self.server = server

    def call(self, tool: str, args: dict, deadline: float) -> ToolOutcome:
        from fastmcp import Client

        async def run():
            async with Client(self.server.mcp) as client:
                return await client.call_tool(tool, args, raise_on_error=False)

        result = asyncio.run(run())
        if result.is_error:
            error_type, text = parse_tool_error(result.content[0].text)
            return ToolOutcome(error_type=error_type, message=text)
        return ToolOutcome(result=result.structured_content)
