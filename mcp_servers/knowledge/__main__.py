"""``python -m mcp_servers.knowledge``: run the knowledge server (stdio, or ``--http HOST:PORT``)."""

from mcp_servers.knowledge.server import main

raise SystemExit(main())
