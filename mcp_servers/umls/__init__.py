"""The UMLS server: a cached UMLS subset (store, import from RRF, lookup, search, grounding) behind MCP tools."""
