"""The house rules a maintainer can rely on: ruff's checks pass over the whole tree (rules in
pyproject.toml [tool.ruff]) and no source file of the product is over 400 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("appliance", "common", "models", "mcp_servers", "ehr_db", "tui")
MAX_LINES = 400

pytestmark = pytest.mark.timeout(120)


def test_ruff_passes_over_the_tree():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_product_file_is_over_400_lines():
    long = {str(path.relative_to(ROOT)): n for package in PRODUCT for path in (ROOT / package).rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these files (over {MAX_LINES} lines): {long}"
