"""``python -m mcp_servers.ehr``: run the ehr server (stdio, or ``--http HOST:PORT``)."""

from mcp_servers.ehr.server import main

raise SystemExit(main())
