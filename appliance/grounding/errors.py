"""The grounding package's exceptions (converted at each edge: CLI message, MCP ToolError)."""

from __future__ import annotations

from appliance.errors import ApplianceError


class GroundingError(ApplianceError):
    """Grounding could not run."""


class SearchUnavailable(GroundingError):
    """The concept search could not be reached or gave an unreadable answer."""
