"""The operator named in configuration: who writes when the appliance has no clinician accounts.

Invariant: the same answer everywhere it is asked (the EHR server's author of a write, the
approval dialog's "author" line): ``$APPLIANCE_USER`` when set, otherwise the OS account name.
With clinician accounts, the terminal and the line session start the servers with the
signed-in clinician as their ``$APPLIANCE_USER`` (``appliance.accounts``), so this still names
the author inside the EHR server.
"""

from __future__ import annotations

import getpass

from common import environment


def operator_name() -> str:
    name = environment.read(environment.USER)
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "appliance"
