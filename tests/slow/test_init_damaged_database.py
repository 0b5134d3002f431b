"""`appliance init` in a fresh process on a damaged EHR: one clear line, exit 2 (subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys

from appliance.cli import main


def test_init_in_a_new_process_on_a_damaged_database_is_one_clear_line(appliance_home):
    assert main(["init", "--no-model"]) == 0
    with open(appliance_home / "ehr.sqlite", "r+b") as handle:
        handle.seek(4096 * 4)
        handle.write(b"\xff" * 4096 * 4)
    done = subprocess.run([sys.executable, "-m", "appliance.cli", "init", "--no-model"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "APPLIANCE_HOME": str(appliance_home)})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("appliance: ehr.sqlite is damaged") and done.stderr.count("\n") == 1
