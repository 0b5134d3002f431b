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


def row_claim(path: Path, table: str, row_id: str) -> dict:
    """What a write's audit row records about the one new row it wrote (``ehr_db.custody``),
    recomputed here from the row as stored."""
    from ehr_db import custody

    conn = sqlite3.connect(path)
    try:
        cursor = conn.execute(f"SELECT * FROM {table} WHERE id = ?", [row_id])
        values = cursor.fetchone()
        digest = custody.row_digest(table, [c[0] for c in cursor.description], values)
    finally:
        conn.close()
    return custody.claim([(table, row_id, None, digest)])


def call(server, tool: str, args: dict):
    """One tool call through an in-memory fastmcp Client; the result's data."""
    async def go():
        async with Client(server) as client:
            return (await client.call_tool(tool, args)).data
    return asyncio.run(go())
