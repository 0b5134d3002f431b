"""How the safety gate reaches the local drug data: a two-method protocol, and two implementations.

``drug_safety`` returns exactly what the knowledge server's ``check_drug_safety`` tool returns
(``mcp_servers.knowledge_queries.drug_safety``: drug, matched_name, brand_names, drug_class,
has_boxed_warning, boxed_warning, contraindications, major_warnings, clipped, source,
demo_content), or None when the drug is not in the data. ``interactions`` returns exactly what
``check_drug_interactions`` returns (``knowledge_queries.check_interactions``: drugs_checked,
not_recognised, ambiguous, same_drug_given_twice, pairs_checked, interactions, label_mentions,
note); when fewer than two names are recognised the tool fails, and the protocol instead returns
that shape with every name in ``not_recognised``, so the gate can say what went unchecked.

Invariants:
- "Not in the data" (None, ``not_recognised``) is never confused with "the service failed"
  (``KnowledgeUnavailable``) or "the name is ambiguous" (``AmbiguousDrug``).
- ``interactions`` is called with 2 to ``MAX_INTERACTION_NAMES`` names (the tool's limit) and
  names of at most ``MAX_NAME`` characters (the tool's argument schema).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from mcp_servers import knowledge_queries as queries
from mcp_servers.knowledge_store import AmbiguousDrugName, DrugNotFound, connect

MAX_INTERACTION_NAMES = 6
MAX_NAME = 60


class SafetyLookupError(Exception):
    """Base class of the knowledge lookups' expected failures."""


class AmbiguousDrug(SafetyLookupError):
    """The name matches several drugs in the local data."""

    def __init__(self, name: str, candidates: list[str]):
        super().__init__(name)
        self.name = name
        self.candidates = candidates


class KnowledgeUnavailable(SafetyLookupError):
    """The knowledge service could not answer (timeout, not running, server error)."""


class KnowledgeLookup(Protocol):
    def drug_safety(self, name: str) -> dict | None: ...

    def interactions(self, names: list[str]) -> dict: ...


def nothing_recognised(names: list[str]) -> dict:
    """``check_drug_interactions``' shape for a call where fewer than two names were recognised."""
    return {"drugs_checked": [], "not_recognised": list(names), "ambiguous": {}, "same_drug_given_twice": [],
            "pairs_checked": 0, "interactions": [], "label_mentions": [], "note": ""}


class StoreKnowledge:
    """In process, over a knowledge database file (tests, and tools that hold the file): one
    read-only connection, opened at the first lookup and kept until ``close`` (a matrix run
    makes hundreds of lookups)."""

    def __init__(self, db_path: Path | str):
        self.db_path = Path(db_path)
        self._conn = None

    def _db(self):
        if self._conn is None:
            self._conn = connect(self.db_path, read_only=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def drug_safety(self, name: str) -> dict | None:
        try:
            return queries.drug_safety(self._db(), name)
        except DrugNotFound:
            return None
        except AmbiguousDrugName as exc:
            raise AmbiguousDrug(name, exc.candidates) from None

    def interactions(self, names: list[str]) -> dict:
        try:
            return queries.check_interactions(self._db(), names)
        except (DrugNotFound, AmbiguousDrugName):
            return nothing_recognised(names)


class ToolBoxKnowledge:
    """Over the agent's tools (``check_drug_safety``, ``check_drug_interactions``), each call
    bounded by ``deadline`` seconds, as TOOL_EXECUTE calls them."""

    def __init__(self, tools, deadline: float):
        self._tools = tools  # appliance.tools.base.ToolBox
        self._deadline = deadline

    def drug_safety(self, name: str) -> dict | None:
        outcome = self._tools.call("check_drug_safety", {"drug_name": name[:MAX_NAME]}, self._deadline)
        if outcome.ok:
            return outcome.result
        if outcome.error_type == "drug_not_in_database":
            return None
        if outcome.error_type == "ambiguous_drug_name":
            found = re.search(r"matches several drugs: (.*?); name the generic", outcome.message or "")
            raise AmbiguousDrug(name, found.group(1).split(", ") if found else [])
        raise KnowledgeUnavailable(outcome.error_type or "server_error")

    def interactions(self, names: list[str]) -> dict:
        args = {"drug_names": [n[:MAX_NAME] for n in names]}
        outcome = self._tools.call("check_drug_interactions", args, self._deadline)
        if outcome.ok:
            return outcome.result
        if outcome.error_type in ("drug_not_in_database", "ambiguous_drug_name"):
            return nothing_recognised(names)
        raise KnowledgeUnavailable(outcome.error_type or "server_error")


__all__ = [
    "MAX_INTERACTION_NAMES", "MAX_NAME", "AmbiguousDrug", "KnowledgeLookup", "KnowledgeUnavailable",
    "SafetyLookupError", "StoreKnowledge", "ToolBoxKnowledge", "nothing_recognised",
]
