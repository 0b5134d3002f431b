"""How the safety gate reaches the local drug data: a two-method protocol, and two implementations.

``drug_safety`` returns exactly what the knowledge server's ``check_drug_safety`` tool returns
(``mcp_servers.knowledge.queries.drug_safety``: drug, matched_name, brand_names, drug_class,
has_boxed_warning, boxed_warning, contraindications, major_warnings, clipped, source,
demo_content), or None when the drug is not in the data. ``interactions`` returns exactly what
``check_drug_interactions`` returns (``knowledge.queries.check_interactions``: drugs_checked,
not_recognised, ambiguous, same_drug_given_twice, pairs_checked, interactions, label_mentions,
note); when fewer than two names are recognised the tool fails, and the protocol instead returns
that shape with every name in ``not_recognised``, so the gate can say what went unchecked.

A lookup may also offer ``drug_synonym(name)`` (``SynonymLookup``): the drug concept a name is an
exact synonym, abbreviation or brand of in the UMLS subset, as that concept's preferred name
("MS Contin" -> "Morphine"), or None. The gate asks it only for a prescribed name that neither
the curated tables nor the drug-name recogniser know (``ingredients.ingredients_of``); callers
with only the two methods above keep working (no synonyms). ``StoreKnowledge`` reads a UMLS
database when given one; ``ToolBoxKnowledge`` calls the UMLS server's ``concept_search``.

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

from appliance.errors import ApplianceError
from mcp_servers.knowledge import queries
from mcp_servers.knowledge.store import AmbiguousDrugName, DrugNotFound, connect
from mcp_servers.umls import foundation as umls_foundation
from mcp_servers.umls import search as umls_search

MAX_INTERACTION_NAMES = 6
MAX_NAME = 60
SYNONYM_SCORE = 0.9  # concept_search: 1.0 exact preferred name, 0.9 exact synonym, abbreviation or brand
SYNONYM_CANDIDATES = 5


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


class SynonymLookup(Protocol):
    def drug_synonym(self, name: str) -> str | None: ...


def synonym_from(candidates: list[dict]) -> str | None:
    """The one drug concept ``concept_search`` candidates name exactly (score 0.9 or more, a drug
    semantic type), as its preferred name; None when there is none, or several (not a guess)."""
    names = {c.get("name") for c in candidates or [] if isinstance(c, dict) and c.get("name")
             and (c.get("score") or 0) >= SYNONYM_SCORE and c.get("tui") in umls_foundation.DRUG_TUIS}
    return names.pop() if len(names) == 1 else None


def nothing_recognised(names: list[str]) -> dict:
    """``check_drug_interactions``' shape for a call where fewer than two names were recognised."""
    return {"drugs_checked": [], "not_recognised": list(names), "ambiguous": {}, "same_drug_given_twice": [],
            "pairs_checked": 0, "interactions": [], "label_mentions": [], "note": ""}


class StoreKnowledge:
    """In process, over a knowledge database file (tests, and tools that hold the file): one
    read-only connection, opened at the first lookup and kept until ``close`` (a matrix run
    makes hundreds of lookups). With ``umls_db_path`` it also answers ``drug_synonym``."""

    def __init__(self, db_path: Path | str, umls_db_path: Path | str | None = None):
        self.db_path = Path(db_path)
        self.umls_db_path = Path(umls_db_path) if umls_db_path is not None else None
        self._conn = None
        self._umls = None

    def _db(self):
        if self._conn is None:
            self._conn = connect(self.db_path, read_only=True)
        return self._conn

    def close(self) -> None:
        for conn in (self._conn, self._umls):
            if conn is not None:
                conn.close()
        self._conn = self._umls = None

    def drug_synonym(self, name: str) -> str | None:
        if self.umls_db_path is None or not umls_foundation.norm(name or ""):
            return None
        if self._umls is None:
            self._umls = umls_foundation.connect(self.umls_db_path, read_only=True)
        try:
            return synonym_from(umls_search.search(self._umls, name[:umls_search.MAX_TERM_CHARS], SYNONYM_CANDIDATES))
        except umls_foundation.UmlsError:
            return None

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

    def drug_synonym(self, name: str) -> str | None:
        """Through the UMLS server's concept_search; any failure is "no synonym known" (the name
        then stays unknown, which the gate reports)."""
        args = {"term": name[:umls_search.MAX_TERM_CHARS], "max_results": SYNONYM_CANDIDATES}
        try:
            outcome = self._tools.call("concept_search", args, self._deadline)
        except (ApplianceError, OSError, TimeoutError):
            return None
        return synonym_from((outcome.result or {}).get("candidates") or []) if outcome.ok else None

    def interactions(self, names: list[str]) -> dict:
        args = {"drug_names": [n[:MAX_NAME] for n in names]}
        outcome = self._tools.call("check_drug_interactions", args, self._deadline)
        if outcome.ok:
            return outcome.result
        if outcome.error_type in ("drug_not_in_database", "ambiguous_drug_name"):
            return nothing_recognised(names)
        raise KnowledgeUnavailable(outcome.error_type or "server_error")


__all__ = [
    "MAX_INTERACTION_NAMES", "MAX_NAME", "SYNONYM_SCORE", "AmbiguousDrug", "KnowledgeLookup", "KnowledgeUnavailable",
    "SafetyLookupError", "StoreKnowledge", "SynonymLookup", "ToolBoxKnowledge", "nothing_recognised", "synonym_from",
]
