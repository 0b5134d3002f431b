"""The floor plan in pyproject.toml ([tool.importlinter]) holds: no import runs from a lower
floor to a higher one (between the top-level packages, and between the floors inside
appliance/), no two sibling modules import each other in a cycle at any depth, and the core
never imports Textual. Lazy imports inside functions count as much as top-level ones.

import-linter runs as ``lint-imports`` would, in a subprocess from the repository root, so a
broken contract fails with its own report (which import, from which line).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLOORS = ["tui", "appliance", "mcp_servers", "ehr_db | models", "common"]

pytestmark = pytest.mark.timeout(120)


def importlinter_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def test_the_floor_plan_is_written_down_without_exceptions():
    config = importlinter_config()
    contracts = {c["type"]: c for c in config["contracts"] if not c.get("containers")}
    assert contracts["layers"]["layers"] == FLOORS
    assert set(config["root_packages"]) == {p for floor in FLOORS for p in floor.split(" | ")}
    assert set(contracts["acyclic_siblings"]["ancestors"]) == set(config["root_packages"])
    for contract in config["contracts"]:
        assert not contract.get("ignore_imports"), f"{contract['name']} has exceptions"


def test_the_floors_inside_appliance_keep_the_libraries_below_the_agent_and_the_cli_on_top():
    inside = [c for c in importlinter_config()["contracts"] if c.get("containers") == ["appliance"]]
    assert len(inside) == 1 and inside[0]["type"] == "layers"
    floors = [set(floor.replace(":", "|").replace(" ", "").split("|")) for floor in inside[0]["layers"]]
    floor_of = {module: depth for depth, modules in enumerate(floors) for module in modules}
    assert {"cli", "line_session"} <= floors[0]
    for library in ("grounding", "extraction", "prescreen", "safety", "medication", "llm"):
        assert floor_of[library] > floor_of["agent"], library


def test_the_appliance_root_holds_the_core_and_folders_only():
    """At most 8 modules beside the sub-packages (the core: config, errors, runtime, wording)."""
    modules = sorted(p.name for p in (ROOT / "appliance").glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= 8, modules


def test_options_several_commands_take_are_declared_once():
    """The command tree's shared options live in appliance/cli/options.py; no command module
    declares one of them itself."""
    import re

    shared = set(re.findall(r'add_argument\("(--[a-z-]+)"', (ROOT / "appliance/cli/options.py").read_text()))
    assert {"--model", "--json", "--script", "--limit", "--out", "--resume"} <= shared
    for path in (ROOT / "appliance/cli").glob("*.py"):
        if path.name in ("options.py", "grounding_serve.py"):  # grounding_serve: its own executable
            continue
        declared = set(re.findall(r'add_argument\("(--[a-z-]+)"', path.read_text()))
        assert not declared & shared, (path.name, declared & shared)


def test_the_import_contracts_hold():
    # The CLI's own entry point; --no-cache keeps .import_linter_cache out of the tree.
    proc = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
         "--no-cache", "--no-logo"],
        cwd=ROOT, capture_output=True, text=True, timeout=100,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept = len(importlinter_config()["contracts"])
    assert f"Contracts: {kept} kept, 0 broken." in proc.stdout, proc.stdout


def test_no_two_test_files_share_a_name():
    """The tests folders have no __init__.py, so pytest imports each test file by its bare name:
    two files called the same stop the whole run at collection, before any test runs."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not shared, f"test modules must have unique names: {shared}"


def test_every_appliance_variable_is_a_setting_or_in_the_one_table_and_read_in_one_place():
    """One place reads the environment: every ``APPLIANCE_*`` name in the code is a ``Settings``
    field (the agent core) or in ``common.environment.VARIABLES`` (the process plumbing), and
    only that module (and ``common.locations.scratch_home``, which restores what it sets)
    touches one through ``os.environ`` directly."""
    import re

    from appliance.config import Settings
    from common import environment

    settings = {f"APPLIANCE_{name.upper()}" for name in Settings.model_fields}
    known = settings | set(environment.VARIABLES)
    sources = [p for package in FLOORS for name in package.split(" | ") for p in (ROOT / name).rglob("*.py")]
    named, direct = set(), []
    for path in sources:
        text = path.read_text()
        named |= {(m, path.relative_to(ROOT).as_posix()) for m in re.findall(r"\bAPPLIANCE_[A-Z0-9_]*[A-Z0-9]\b", text)}
        if path.name not in ("environment.py", "locations.py") and re.search(r"os\.environ(\.get|\.pop|\[)\(?[\"']APPLIANCE_",
                                                                            text):
            direct.append(path.relative_to(ROOT).as_posix())
    assert sorted((m, where) for m, where in named if m not in known) == []
    assert direct == []
    assert "os.environ" not in (ROOT / "appliance/cli/__init__.py").read_text()
