"""Running ``appliance`` as an operator would, for the slow tests: a subprocess on a given data
home, two llama.cpp threads (the machines have two cores)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from common.locations import PROJECT_ROOT


def run(args: list[str], home: Path, timeout: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "APPLIANCE_HOME": str(home), "FASTMCP_CHECK_FOR_UPDATES": "off", "APPLIANCE_N_THREADS": "2"}
    return subprocess.run([sys.executable, "-m", "appliance.cli", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
