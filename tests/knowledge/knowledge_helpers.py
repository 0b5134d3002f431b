"""Helpers for the knowledge server tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp_servers.contracts import parse_tool_error
from mcp_servers.knowledge import server as knowledge

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def call(tool: str, args: dict) -> tuple[dict | None, tuple[str, str] | None]:
    """Call one tool in memory: (structured result, None) or (None, (error_type, text))."""
    from fastmcp import Client

    async def run():
        async with Client(knowledge.mcp) as client:
            return await client.call_tool(tool, args, raise_on_error=False)

    result = asyncio.run(run())
    if result.is_error:
        return None, parse_tool_error(result.content[0].text)
    return result.structured_content, None
