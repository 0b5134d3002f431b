"""Plain helpers for the EHR tests (fixtures live in conftest.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from fastmcp import Client

from ehr_db.migrations import CLINICAL_TABLES

COUNTED_TABLES = ("patients", *CLINICAL_TABLES, "audit_log")
FIXTURES = Path(__file__).parent / "fixtures"


def row_counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED_TABLES}
    finally:
        conn.close()


def audit_rows(path: Path) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM audit_log ORDER BY id")]
    finally:
        conn.close()


def call(server, tool: str, args: dict):
    """One tool call through an in-memory fastmcp Client; the result's data."""
    async def go():
        async with Client(server) as client:
            return (await client.call_tool(tool, args)).data
    return asyncio.run(go())
