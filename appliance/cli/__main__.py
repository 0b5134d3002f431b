"""``python -m appliance.cli``: the appliance command line (as the ``appliance`` command, without the terminal)."""

from appliance.cli import main

raise SystemExit(main())
