"""What the knowledge importers share: the report of one run, the error for a record of the
wrong shape, and readers for JSON fields that may hold anything (``knowledge.importers.openfda``,
``knowledge.importers.ctgov``, ``knowledge.importers.pubmed``, run by ``knowledge.importers.driver``).

Invariant: a field reader never raises on a wrong type: it returns an empty list or object, and
the mapper decides whether that skips the record or makes it malformed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mcp_servers.knowledge.store import KnowledgeError


class MalformedRecord(KnowledgeError):
    """A record's field has the wrong JSON type: the file is not in the format (the run stops)."""


@dataclass
class KnowledgeImportReport:
    """What one import run did, for the CLI."""

    kind: str
    files: int = 0
    records: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    rows_before: dict = field(default_factory=dict)
    rows_after: dict = field(default_factory=dict)

    def count(self, status: str) -> None:
        setattr(self, status, getattr(self, status) + 1)

    def summary(self) -> str:
        text = (
            f"{self.kind}: {self.files} file(s), {self.records} record(s) read; {self.inserted} inserted, "
            f"{self.updated} updated, {self.unchanged} unchanged"
        )
        if self.deleted:
            text += f", {self.deleted} deleted"
        total = sum(self.skipped.values())
        text += f"; {total} skipped"
        if total:
            text += " (" + "; ".join(f"{reason}: {n}" for reason, n in self.skipped.most_common()) + ")"
        for note, n in self.notes.most_common():
            text += f"\n  note: {note}: {n}"
        if self.rows_after:
            sizes = (f"{t} {self.rows_before.get(t, 0)} -> {n}" for t, n in self.rows_after.items())
            text += "\n  store: " + ", ".join(sizes)
        return text


def strings(value: Any) -> list[str]:
    """A field openFDA gives as a list of strings (one string counts as one item)."""
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return [i for i in items if isinstance(i, str) and i.strip()]


def object_of(value: Any) -> dict:
    return value if isinstance(value, dict) else {}
