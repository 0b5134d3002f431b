"""Concept search as grounding sees it: one ``ConceptSearch`` protocol, answered in process
(``umls.search.search`` on the local database) or through the UMLS MCP server's
``concept_search`` tool (any transport the MCP client supports).

Invariants:
- ``search(term, max_results)`` returns ``concept_search`` candidates best first (CUI and
  SNOMED CT code in each), [] when nothing matches or the term is not searchable;
  ``SearchUnavailable`` when the search itself failed (the loop sends that entity to review).
- ``calls`` counts the searches made, for the grounding statistics.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from appliance.grounding.errors import SearchUnavailable
from mcp_servers.umls.grounding import db_search

if TYPE_CHECKING:
    from appliance.tools.mcp_client import MCPToolBox


class ConceptSearch(Protocol):
    calls: int

    def search(self, term: str, max_results: int) -> list[dict]: ...


class InProcessSearch:
    """``umls.search.search`` on a local database, read-only; the database is built from the
    shipped starter subset first if the file does not exist (as the server does)."""

    def __init__(self, db_path: Path | str):
        self.path = Path(db_path)
        self.calls = 0
        self._conn = None
        self._lock = threading.Lock()  # one sqlite connection, used by one thread at a time

    def _connection(self):
        if self._conn is None:
            from mcp_servers.umls.foundation import connect
            from mcp_servers.umls.store import ensure_database

            if not self.path.exists():
                ensure_database(self.path)
            self._conn = connect(self.path, read_only=True)
        return self._conn

    def search(self, term: str, max_results: int) -> list[dict]:
        with self._lock:
            self.calls += 1
            try:
                return db_search(self._connection())(term, max_results)
            except Exception as exc:  # noqa: BLE001 - a broken database is a failed search, not a crash
                raise SearchUnavailable(f"the local UMLS database could not be searched ({type(exc).__name__})") from None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> InProcessSearch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MCPSearch:
    """The UMLS server's ``concept_search`` through the agent's MCP client."""

    def __init__(self, toolbox: MCPToolBox, deadline: float = 10.0):
        self.toolbox = toolbox
        self.deadline = deadline
        self.calls = 0

    def search(self, term: str, max_results: int) -> list[dict]:
        self.calls += 1
        outcome = self.toolbox.call_server("umls", "concept_search", {"term": term[:200], "max_results": max_results},
                                           self.deadline)
        if outcome.error_type in ("not_found", "invalid_args"):
            return []
        if not outcome.ok:
            raise SearchUnavailable(f"concept_search failed: {outcome.error_type}")
        candidates = (outcome.result or {}).get("candidates")
        if not isinstance(candidates, list) or not all(isinstance(c, dict) for c in candidates):
            raise SearchUnavailable("concept_search gave an unreadable answer")
        return candidates


_default: InProcessSearch | None = None
_default_lock = threading.Lock()


def default_search() -> InProcessSearch:
    """The process's in-process search of the data home's UMLS database (for callers that
    pass no search)."""
    global _default
    from common.locations import umls_db_path

    with _default_lock:
        if _default is None or _default.path != umls_db_path():
            _default = InProcessSearch(umls_db_path())
        return _default
