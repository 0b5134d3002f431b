"""How the agent reaches its tools: MCP clients for the local servers, and local tools."""
