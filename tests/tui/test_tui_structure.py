"""The terminal's code keeps the house shape: small modules, workers that only post messages."""

from __future__ import annotations

import ast
from pathlib import Path

import tui

TUI = Path(tui.__file__).resolve().parent
LIMIT = 500


def test_every_tui_module_stays_under_the_house_limit():
    sizes = {str(p.relative_to(TUI)): len(p.read_text().splitlines()) for p in TUI.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}


def _is_thread_worker(func: ast.FunctionDef) -> bool:
    for deco in func.decorator_list:
        if isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "work":
            if any(k.arg == "thread" and getattr(k.value, "value", False) is True for k in deco.keywords):
                return True
    return False


def test_thread_workers_never_assign_app_state():
    """A thread worker posts a message; only handlers on the UI thread set attributes."""
    offenders = []
    for path in TUI.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and _is_thread_worker(node):
                for inner in ast.walk(node):
                    targets = inner.targets if isinstance(inner, ast.Assign) else (
                        [inner.target] if isinstance(inner, (ast.AugAssign, ast.AnnAssign)) else [])
                    for target in targets:
                        if isinstance(target, ast.Attribute) and getattr(target.value, "id", None) == "self":
                            offenders.append(f"{path.name}:{inner.lineno} {node.name} sets self.{target.attr}")
    assert offenders == []
