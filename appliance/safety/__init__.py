"""The medication safety gate: code checks a prescription against the chart before
anyone is asked to approve it.

- ``check_prescription(drug, chart, knowledge) -> SafetyReport`` (``gate.py``): allergies and
  class cross-reactivity, interactions with every active medication (active orders only: held,
  draft, stopped and completed ones never count), duplicate therapy (``checks.py``), and
  pregnancy, renal function (with the daily dose against the renal band's cap) and age against
  the drug's safety data and curated tables (``patient_checks.py``).
- ``SafetyReport`` (``report.py``): findings most severe first; ``blocking`` (a high finding),
  ``lines()`` for the approval dialog, ``formatted()`` for SYNTHESIZE and the line session,
  ``to_audit()`` for the write's audit row.
- ``decide`` (``policy.py``): the one rule every door applies to a prescription (approval,
  override with a reason of real words and the password again, or refusal).
- ``KnowledgeLookup`` (``knowledge.py``): the two lookups the gate needs, shaped exactly like
  the knowledge server's check_drug_safety and check_drug_interactions results;
  ``ToolBoxKnowledge`` calls those tools, ``StoreKnowledge`` reads a knowledge database in process.
- ``classes.py`` and ``rules.py``: the curated tables, with their sources.

The package sits in ``appliance`` (it may use ``mcp_servers`` and ``ehr_db`` below it) and
never logs: charts are patient data.
"""

from appliance.safety.gate import check_prescription
from appliance.safety.knowledge import (
    AmbiguousDrug,
    KnowledgeLookup,
    KnowledgeUnavailable,
    StoreKnowledge,
    ToolBoxKnowledge,
)
from appliance.safety.policy import Override, OverridePolicy, PolicyDecision, decide
from appliance.safety.report import Finding, SafetyReport, override_reason

__all__ = [
    "AmbiguousDrug", "Finding", "KnowledgeLookup", "KnowledgeUnavailable", "Override", "OverridePolicy",
    "PolicyDecision", "SafetyReport", "StoreKnowledge", "ToolBoxKnowledge", "check_prescription", "decide",
    "override_reason",
]
