"""The contention bench's busy processes end with the bench on every exit path: the block's end,
an exception, SIGTERM to the bench, and the bench killed outright (SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from appliance.bench.busy import busy
from common.locations import PROJECT_ROOT

pytestmark = pytest.mark.timeout(120)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone_within(pids: list[int], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_busy_processes_run_in_the_block_and_stop_after_it():
    with busy(cpu=2) as pids:
        assert len(pids) == 2 and all(alive(p) for p in pids)
    assert gone_within(pids)


def test_an_exception_in_the_block_stops_them():
    seen: list[int] = []
    with pytest.raises(RuntimeError):
        with busy(cpu=1) as pids:
            seen += pids
            raise RuntimeError("a turn failed")
    assert seen and gone_within(seen)


BENCH = """
import json, sys, time
from appliance.bench.busy import busy, stoppable
with stoppable(), busy(cpu=2) as pids:
    print(json.dumps(pids), flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_the_bench_stopped_or_killed_leaves_none_behind(how):
    bench = subprocess.Popen([sys.executable, "-c", BENCH], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        pids = json.loads(bench.stdout.readline())
        assert all(alive(p) for p in pids)
        os.kill(bench.pid, how)
        bench.wait(timeout=30)
        if how != signal.SIGKILL:  # stopped: the bench's own exception, so its finally ran
            assert "Stopped" in bench.stderr.read()
        assert gone_within(pids), [p for p in pids if alive(p)]
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()


@pytest.mark.parametrize("cores, expected", [
    (1, [("idle", 0, 0), ("1_busy", 1, 0), ("second_model", 0, 1)]),
    (2, [("idle", 0, 0), ("1_busy", 1, 0), ("second_model", 0, 1)]),  # 1 and cores-1 are one condition
    (4, [("idle", 0, 0), ("1_busy", 1, 0), ("3_busy", 3, 0), ("second_model", 0, 1)]),
])
def test_the_contention_conditions(cores, expected):
    from appliance.bench.contention import _plan

    assert _plan(cores) == expected


def test_the_contention_table_prints_each_condition_and_its_ratio(capsys):
    from appliance.bench.contention import print_report

    row = {"busy_processes": 0, "model_processes": 0, "turns_s": [4.0, 5.0, 6.0], "median_turn_s": 5.0, "vs_idle": 1.0}
    busy_row = {**row, "busy_processes": 1, "median_turn_s": 9.5, "vs_idle": 1.9, "decode_threads_chosen": {"1": 12}}
    print_report({"model": "gemma3-270m", "cores": 2, "turns_per_condition": 3, "thread_policy": "per call",
                  "in_process": {"idle": row, "1_busy": busy_row}, "host": {"idle": row}})
    lines = capsys.readouterr().out.splitlines()
    assert "2 cores, 3 turns per condition" in lines[0]
    assert any(line.startswith("in_process") and "1_busy" in line and "1.9" in line and "{'1': 12}" in line
               for line in lines)
    assert sum(line.startswith("host") for line in lines) == 1
