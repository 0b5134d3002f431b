"""Who is at the keyboard, until clinician sign-in exists: the operator named in configuration.

Invariant: the same answer everywhere it is asked (the EHR server's author of a write, the
approval dialog's "author" line): ``$APPLIANCE_USER`` when set, otherwise the OS account name.
"""

from __future__ import annotations

import getpass
import os


def operator_name() -> str:
    name = os.environ.get("APPLIANCE_USER", "").strip()
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "appliance"
