"""The record server: the local EHR (``ehr_db``) behind MCP tools; ``server`` holds the tools."""
