"""Bad command lines: generated argv for ``appliance`` (unknown options and words, junk patient
IDs, junk files and folders for the import, backup and restore commands, bad ``--model`` and
``--script``) on a real data home. Every run exits 0, 1 or 2 and prints no traceback and no
internal path (``cli_argv.check_run``). The MCP servers run in this process (a scripted ``ask``
would otherwise start them as subprocesses); nothing generated loads the real model."""

from __future__ import annotations

import pytest

from tests.properties.cli_argv import cli_on_a_fresh_home, generated_runs

pytestmark = pytest.mark.timeout(300)
FAST_RUNS = 150  # the slow run makes more (tests/slow/test_bad_input_thousands.py)


def test_generated_command_lines_exit_cleanly(appliance_home, tmp_path, monkeypatch, capsys):
    with cli_on_a_fresh_home(tmp_path, monkeypatch) as files:
        codes = generated_runs(files, FAST_RUNS)
    with capsys.disabled():
        print(f"\ncommand lines: {sum(codes.values())} runs, exit codes {dict(sorted(codes.items()))}")
    assert sum(codes.values()) >= FAST_RUNS
