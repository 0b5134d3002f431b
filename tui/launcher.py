"""The ``appliance`` console script: ``appliance.cli`` with the clinic terminal plugged in.

Invariants:
- Every command line is ``appliance.cli.main``'s (same arguments, output, exit codes); this
  module only gives it the runner that starts the TUI, for ``appliance tui`` and for the bare
  command on a terminal. The TUI lives above the core, so only this floor may start it.
- Importing this module imports no Textual: ``tui.app`` loads when the terminal starts, so the
  headless commands stay as quick as before.
"""

from __future__ import annotations

import sys

from appliance import cli
from appliance.config import Settings


def run_tui(settings: Settings, script: dict | None, resume: str | None) -> int:
    """Start the clinic terminal in this terminal; returns its exit code."""
    from tui.app import run

    return run(settings, script=script, resume=resume)


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, run_tui=run_tui)


if __name__ == "__main__":
    sys.exit(main())
