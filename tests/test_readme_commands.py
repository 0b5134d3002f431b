"""Every command the README shows still exists: each distinct ``appliance ...`` subcommand path
found in the README (its fenced blocks and its inline code) is run with ``--help`` through the
installed console script, in a subprocess, and must exit 0 with a usage line.

A command's path is its leading lower-case words (``appliance ehr backup --verify PATH`` ->
``ehr backup``); ``a|b|c`` words and `` | b`` alternatives (``user list | disable NAME``) give a
path each. One process per distinct path keeps the whole run to a few seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
APPLIANCE = ROOT / ".venv" / "bin" / "appliance"
WORD = re.compile(r"[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*")

pytestmark = pytest.mark.timeout(120)


def code_snippets(text: str) -> list[str]:
    """The lines of fenced blocks, and every inline code span outside them (a span may wrap)."""
    snippets, prose, fenced = [], [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            snippets.append(line)
        else:
            prose.append(line)
    snippets += re.findall(r"`([^`]+)`", " ".join(prose))
    return snippets


def _expand(words: list[str]) -> list[tuple[str, ...]]:
    paths = [()]
    for word in words:
        paths = [(*path, choice) for path in paths for choice in word.split("|")]
    return paths


def command_paths(snippet: str) -> set[tuple[str, ...]]:
    """The subcommand paths of every ``appliance`` command in one snippet."""
    tokens = snippet.split("#", 1)[0].split()
    found: set[tuple[str, ...]] = set()
    for at, token in enumerate(tokens):
        if token != "appliance" and not token.endswith("/bin/appliance"):
            continue
        rest = tokens[at + 1:]
        words = []
        for word in rest:
            if not WORD.fullmatch(word):
                break
            words.append(word)
        found.update(_expand(words))
        for i, word in enumerate(rest[:-1]):  # "list [--json] | disable NAME": disable beside list
            if word == "|" and words and WORD.fullmatch(rest[i + 1]):
                found.update(_expand([*words[:-1], rest[i + 1]]))
    return found


def readme_paths() -> list[tuple[str, ...]]:
    paths: set[tuple[str, ...]] = set()
    for snippet in code_snippets(README.read_text(encoding="utf-8")):
        paths |= command_paths(snippet)
    return sorted(paths)


PATHS = readme_paths()


def test_the_readme_shows_the_command_tree():
    for expected in [(), ("ask",), ("ehr", "import"), ("user", "disable"), ("knowledge", "import", "pubmed"),
                     ("eval", "grounding"), ("terminal", "revoke")]:
        assert expected in PATHS, expected
    assert command_paths("appliance ehr backup --verify PATH  # | not a command") == {("ehr", "backup")}


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "(bare)" for p in PATHS])
def test_every_readme_command_answers_help(path, tmp_path):
    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path / "home")}
    done = subprocess.run([str(APPLIANCE), *path, "--help"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"appliance {' '.join(path)} --help: {done.stderr[-2000:]}"
    assert "usage:" in done.stdout.lower()
