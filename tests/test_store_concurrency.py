"""The read-only servers while an importer rebuilds their database: tools keep answering from a
consistent snapshot and never surface "database is locked" (the EHR's readers-and-writer test
is tests/ehr/test_ehr_concurrency.py)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from fastmcp import Client

from mcp_servers.knowledge import server as knowledge
from mcp_servers.knowledge.importers.driver import import_openfda_labels
from mcp_servers.knowledge.store import ensure_database as ensure_knowledge
from mcp_servers.umls import server as umls
from mcp_servers.umls.importer import import_rrf
from mcp_servers.umls.store import ensure_database as ensure_umls

TESTS = Path(__file__).resolve().parent
READERS = 3
IMPORTS = 6


def _readers_during(server, tool: str, args: dict, write) -> list[dict]:
    """Run ``write`` while READERS threads call ``tool``; return every result (errors raise)."""
    results: list[dict] = []
    errors: list[BaseException] = []
    done = threading.Event()

    async def read_until_done():
        async with Client(server) as client:
            while True:
                finished = done.is_set()
                results.append((await client.call_tool(tool, args)).structured_content)
                if finished:
                    return

    def reader():
        try:
            asyncio.run(read_until_done())
        except BaseException as exc:  # collected and raised below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(READERS)]
    for t in threads:
        t.start()
    try:
        write()
    finally:
        done.set()
        for t in threads:
            t.join(60)
    if errors:
        raise errors[0]
    return results


def test_umls_search_during_rrf_imports(tmp_path):
    path = tmp_path / "umls.sqlite"
    ensure_umls(path)
    umls.configure(path)
    try:
        results = _readers_during(
            umls.mcp, "concept_search", {"term": "acetaminophen", "max_results": 3},
            lambda: [import_rrf(path, TESTS / "umls" / "fixtures" / "rrf", replace=True) for _ in range(IMPORTS)],
        )
    finally:
        umls.configure(None)
    # Every read saw a whole build (the starter subset or an import), never a half-built one.
    assert len(results) > READERS
    assert all(r["candidates"] and r["candidates"][0]["cui"] == "C0000970" for r in results)


def test_drug_safety_during_openfda_imports(tmp_path):
    path = tmp_path / "knowledge.sqlite"
    ensure_knowledge(path)
    knowledge.configure(path)
    try:
        results = _readers_during(
            knowledge.mcp, "check_drug_safety", {"drug_name": "warfarin"},
            lambda: [import_openfda_labels(TESTS / "knowledge" / "fixtures" / "openfda", path) for _ in range(IMPORTS)],
        )
    finally:
        knowledge.configure(None)
    assert len(results) > READERS
    assert all(r["drug"] == "warfarin" and r["boxed_warning"] for r in results)
