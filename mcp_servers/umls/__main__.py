"""``python -m mcp_servers.umls``: run the umls server (stdio, or ``--http HOST:PORT``)."""

from mcp_servers.umls.server import main

raise SystemExit(main())
