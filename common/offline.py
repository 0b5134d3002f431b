"""Switches that stop dependencies from calling home, set by the appliance itself.

Invariant: every entry point's package (``appliance``, ``tui``, ``mcp_servers``) calls
``no_phone_home()`` in its ``__init__``, so the switches are in the environment before any of
them imports the dependency, whoever starts the process and whatever environment they pass.
An operator's own value is kept (``setdefault``).
"""

from __future__ import annotations

import os

# fastmcp checks its package index for a newer release unless this is "off".
SWITCHES = {"FASTMCP_CHECK_FOR_UPDATES": "off"}


def no_phone_home() -> None:
    for name, value in SWITCHES.items():
        os.environ.setdefault(name, value)
