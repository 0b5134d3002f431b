"""Local MCP servers (fastmcp): one package per server (``ehr``, ``umls``, ``knowledge``), each
with its tools in ``server``; ``contracts`` defines the agent's tools, ``serving`` runs a server."""

from common.offline import no_phone_home

no_phone_home()
