"""The core never imports the TUI or Textual (../shared/STYLE.md: shape of the house; docs/design.md §17).

tests/test_floor_plan.py checks the project's own import statements (lazy ones too); this test
imports each core module for real, so Textual arriving through a third-party package, or a
core module that fails to import, shows up as well."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ("appliance", "models", "mcp_servers", "ehr_db", "common")


def core_modules() -> list[str]:
    names = []
    for package in CORE:
        names.append(package)
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if not info.name.endswith("__main__"):
                names.append(info.name)
    return names


def test_core_modules_do_not_import_textual_or_tui():
    modules = core_modules()
    assert "appliance.agent.graph" in modules and "appliance.cli" in modules
    code = (
        "import importlib, json, sys\n"
        "bad = {}\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    leaked = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tui'))\n"
        "    if leaked: bad[name] = leaked; break\n"
        "print(json.dumps(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {}
