"""``python -m tui``: the clinic terminal with settings from the environment."""

import sys

from tui.app import run

sys.exit(run())
