"""Who is calling an EHR tool (``caller``), and the approval a write keeps (``kept_approval``).

Invariants:
- Over streamable HTTP with terminal tokens (``mcp_servers.access``) the author is the token's
  account, whatever any header says, and the call is bound: a write needs an approval, and the
  approval's clinician is that account (a request cannot name another approver).
- On a loopback HTTP server with no token issued the author is the request's
  ``X-Appliance-User`` header (percent-encoded UTF-8, whitespace collapsed, at most
  ``MAX_AUTHOR_CHARS``): a claim, not an authentication. Over stdio, in memory, or with no such
  header it is this process's user (``common.operator``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_access_token, get_http_request

from common.operator import operator_name
from mcp_servers.contracts import ApprovalRecord
from mcp_servers.ehr.faults import NOT_CHANGED
from mcp_servers.tool_errors import tool_error_message

USER_HEADER = "X-Appliance-User"
MAX_AUTHOR_CHARS = 200


@dataclass(frozen=True)
class Caller:
    author: str  # who the record names
    terminal: str | None  # the token's terminal (over HTTP with terminal tokens); None otherwise

    @property
    def bound(self) -> bool:
        """The author is a terminal token's account, not a claim: the server's rules apply."""
        return self.terminal is not None


def caller() -> Caller:
    """Who is calling: over HTTP with terminal tokens, the token's account (whatever headers
    say); over HTTP on loopback without tokens, the request's user header; else this process's
    user."""
    token = get_access_token()
    if token is not None and token.subject:
        return Caller(token.subject, token.client_id)
    try:
        raw = get_http_request().headers.get(USER_HEADER, "")
    except RuntimeError:  # stdio or in memory: no HTTP request behind this call
        raw = ""
    user = " ".join(unquote(raw, errors="replace").split())[:MAX_AUTHOR_CHARS]
    return Caller(user if user and user.isprintable() else operator_name(), None)


def kept_approval(approval: ApprovalRecord | None, caller: Caller) -> dict[str, Any] | None:
    """The approval as the record takes it (it checks the shape again, and the size). From a
    terminal token it is required and its clinician is the token's account, whatever the
    request named."""
    if approval is None:
        if caller.bound:
            raise ToolError(tool_error_message("invalid_args", "A write through the clinic host needs the "
                                               "clinician's approval (approval)." + NOT_CHANGED))
        return None
    kept = approval.model_dump(exclude={"password"})
    if caller.bound:
        kept["clinician"] = caller.author
    return kept
