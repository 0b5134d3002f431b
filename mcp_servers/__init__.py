"""Local MCP servers (fastmcp): one module per server; ``contracts`` defines the agent's tools."""
