"""The real EHR MCP server with one fault added, for the fault tests (tests/slow/test_mcp_faults.py).

Run as ``python tests/slow/fault_server.py``: the same tools, data and stdio transport as
``python -m mcp_servers.ehr``, except that a call to a tool named in ``$FAULT_GARBAGE_TOOLS``
(comma-separated) first writes junk to stdout, the MCP channel, then answers in a way the
client cannot read: ``$FAULT_GARBAGE`` = ``lines`` (non-JSON lines, then the real answer),
``answer`` (a JSON-RPC response to the request with a malformed result, then nothing) or
``text`` (a well-formed tool result whose text is not the JSON object the tool returns).
With ``$FAULT_GARBAGE_ONCE`` set to a file path, only the first such call does it (the file
records that it happened), so a restarted server answers properly.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastmcp.server.middleware import Middleware  # noqa: E402

from mcp_servers.ehr import server as ehr  # noqa: E402

# The MCP channel: fastmcp moves fd 1 aside (stray prints go to stderr), so keep our own copy.
CHANNEL = os.dup(1)


def _write(text: str) -> None:
    os.write(CHANNEL, text.encode())


class Garbage(Middleware):
    async def on_call_tool(self, context, call_next):
        tools = set(filter(None, os.environ.get("FAULT_GARBAGE_TOOLS", "").split(",")))
        once = os.environ.get("FAULT_GARBAGE_ONCE")
        if context.message.name in tools and not (once and Path(once).exists()):
            if once:
                Path(once).touch()
            mode = os.environ.get("FAULT_GARBAGE", "answer")
            _write("\x00\x01 garbage {not json\nTraceback (most recent call last): junk\n")
            if mode in ("answer", "text"):
                request_id = context.fastmcp_context.request_id
                result = {"content": "garbage", "isError": "maybe"} if mode == "answer" else \
                    {"content": [{"type": "text", "text": "<<garbage: not the chart>>"}], "isError": False}
                _write(json.dumps({"jsonrpc": "2.0", "id": int(request_id) if str(request_id).isdigit() else request_id,
                                   "result": result}) + "\n")
                time.sleep(3600)  # the real answer never comes; the client gives up on this server
        return await call_next(context)


if __name__ == "__main__":
    ehr.mcp.add_middleware(Garbage())
    raise SystemExit(ehr.main(sys.argv[1:]))
