"""Local MCP servers (fastmcp): one module per server; ``contracts`` defines the agent's tools."""

from common.offline import no_phone_home

no_phone_home()
