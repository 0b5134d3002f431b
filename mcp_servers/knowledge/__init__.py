"""The clinical knowledge server: drug safety, interactions, literature and trials behind MCP tools."""
