"""The thread policy: the pure choice over a table of cases, the /proc readings it rests on, and
the governor's decisions over a scripted clock and load."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from appliance.llm.threads import (
    MIN_WINDOW,
    REFRESH,
    STALE,
    CpuSampler,
    ThreadGovernor,
    Threads,
    busy_jiffies,
    choose,
    host_threads,
    own_running_threads,
    runnable_others,
    usable_cores,
)


@pytest.mark.parametrize("cores, others, override, expected", [
    (2, 0.0, None, 2),  # idle: every core
    (2, 0.2, None, 2),  # a little background work leaves the core free
    (2, 0.3, None, 1),  # past the slack the core is taken
    (2, 1.0, None, 1),  # one CPU-bound process: one thread
    (2, 1.9, None, 1),  # never fewer than one
    (2, 5.0, None, 1),
    (8, 1.0, None, 7),
    (8, 2.6, None, 5),
    (8, 0.0, None, 8),
    (1, 0.0, None, 1),
    (0, 0.0, None, 1),  # no cores reported: still one thread
    (2, -1.0, None, 2),  # a negative reading (clock skew) is no load
    (2, 1.0, 2, 2),  # the operator's override wins over the load
    (2, 0.0, 1, 1),
    (2, 0.0, 6, 6),  # taken as given, even above the cores
    (2, 0.0, 0, 1),  # at least one
])
def test_choose_never_exceeds_free_cores_and_honours_the_override(cores, others, override, expected):
    threads = choose(cores, others, override)
    assert threads == Threads(expected, expected)
    if override is None:
        assert 1 <= threads.decode <= max(1, cores)


@pytest.mark.parametrize("cores, override, expected", [
    (2, None, Threads(2, 2)), (3, None, Threads(3, 3)), (4, None, Threads(3, 4)), (16, None, Threads(15, 16)),
    (1, None, Threads(1, 1)), (2, 1, Threads(1, 1)), (16, 4, Threads(4, 4)),
])
def test_host_threads(cores, override, expected):
    assert host_threads(cores, override) == expected


STAT = """cpu  500 0 300 9000 10 0 0 0 0 0
cpu0 100 0 100 4000 5 0 0 0 0 0
cpu1 400 0 200 5000 5 10 20 30 0 0
intr 1234
"""


def test_busy_jiffies_sums_the_cpus_this_process_may_use():
    assert busy_jiffies(STAT, None) == 200 + 660
    assert busy_jiffies(STAT, {0}) == 200
    assert busy_jiffies(STAT, {1}) == 660
    assert busy_jiffies(STAT, {7}) is None
    assert busy_jiffies("", None) is None


@pytest.mark.parametrize("text, expected", [
    ("0.50 0.40 0.30 3/512 999\n", 2.0), ("0.0 0.0 0.0 1/100 5", 0.0), ("garbage", 0.0), ("", 0.0),
])
def test_runnable_others_leaves_out_the_reader(text, expected):
    assert runnable_others(text) == expected


def test_runnable_others_leaves_out_this_process_running_threads(tmp_path):
    assert runnable_others("0.5 0.4 0.3 5/512 999", own_running=3) == 2.0
    assert runnable_others("0.5 0.4 0.3 2/512 999", own_running=4) == 0.0
    for i, state in enumerate("RSRD"):
        (tmp_path / str(i)).mkdir()
        (tmp_path / str(i) / "stat").write_text(f"{100 + i} (python (x)) {state} 1 2 3")
    assert own_running_threads(tmp_path) == 2
    assert own_running_threads(tmp_path / "missing") == 1
    assert own_running_threads() >= 1  # the real one: at least the thread asking


def test_usable_cores_follows_affinity_and_cgroup_quota():
    assert usable_cores({0, 1, 2, 3}, "max 100000") == 4
    assert usable_cores({0, 1, 2, 3}, "150000 100000") == 1
    assert usable_cores({0, 1, 2, 3}, "200000 100000") == 2
    assert usable_cores({0, 1}, "800000 100000") == 2
    assert usable_cores({0, 1}, "nonsense") == 2
    assert usable_cores(set(), "") == 1


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_sampler_subtracts_its_own_cpu_time(tmp_path):
    """Two cores fully busy over a window, one of them ours: the others use one core."""
    clock, own = Clock(), [0.0]
    stat, loadavg = tmp_path / "stat", tmp_path / "loadavg"
    hz = os.sysconf("SC_CLK_TCK")
    cpus = sorted(os.sched_getaffinity(0))
    def write(busy_per_cpu: int) -> None:
        stat.write_text("cpu  0 0 0 0 0 0 0 0\n" + "".join(
            f"cpu{c} {busy_per_cpu} 0 0 0 0 0 0 0\n" for c in cpus))
    write(0)
    loadavg.write_text("1.0 1.0 1.0 4/300 1\n")
    sampler = CpuSampler(cores=len(cpus), clock=clock, stat_path=stat, loadavg_path=loadavg,
                         own_seconds=lambda: own[0])
    assert sampler.others() == min(len(cpus), 3.0)  # no window yet: runnable tasks less the reader
    clock.now += 1.0
    write(hz)  # every CPU busy for the whole second
    own[0] = 1.0  # one of those cores was this process
    assert sampler.others() == pytest.approx(len(cpus) - 1.0)
    clock.now += MIN_WINDOW / 2  # too short a window: the last figure stands
    write(hz * 2)
    assert sampler.others() == pytest.approx(len(cpus) - 1.0)
    clock.now += STALE + 1  # after a quiet spell the window is stale: runnable tasks again
    loadavg.write_text("0.1 0.1 0.1 1/300 1\n")
    assert sampler.others() == 0.0


def test_sampler_without_proc_reads_no_load(tmp_path):
    sampler = CpuSampler(cores=2, stat_path=tmp_path / "missing", loadavg_path=tmp_path / "missing")
    assert sampler.others() == 0.0


class ScriptedLoad:
    cores = 2

    def __init__(self, values):
        self.values = list(values)
        self.calls = 0

    def others(self):
        self.calls += 1
        return self.values.pop(0)


def test_governor_sets_llama_threads_only_on_change_and_at_most_every_refresh():
    clock, load, set_calls = Clock(), ScriptedLoad([0.0, 0.0, 1.0, 0.1]), []
    gov = ThreadGovernor(set_calls.append, sampler=load, clock=clock)
    assert gov.apply() == Threads(2, 2) and set_calls == [Threads(2, 2)]
    clock.now += REFRESH / 2
    assert gov.apply() == Threads(2, 2) and load.calls == 1  # within the refresh: no reading
    clock.now += REFRESH
    assert gov.apply() == Threads(2, 2) and set_calls == [Threads(2, 2)]  # same count: not set again
    clock.now += REFRESH
    assert gov.apply() == Threads(1, 1) and set_calls[-1] == Threads(1, 1)  # a busy process appeared
    clock.now += REFRESH
    assert gov.apply() == Threads(2, 2) and set_calls[-1] == Threads(2, 2)  # and went away
    assert gov.chosen == {2: 3, 1: 1}


def test_governor_override_is_fixed_and_reads_nothing():
    set_calls = []
    gov = ThreadGovernor(set_calls.append, override=3)
    assert gov.sampler is None
    for _ in range(3):
        assert gov.apply() == Threads(3, 3)
    assert set_calls == [Threads(3, 3)]


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs /proc")
def test_a_real_busy_process_is_seen_as_load():
    """A CPU-bound child process reads as others' load; this process's own spinning does not."""
    sampler = CpuSampler()
    sampler.others()
    time.sleep(0.6)
    quiet = sampler.others()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        sampler.others()
        time.sleep(1.0)
        busy = sampler.others()
    finally:
        child.kill()
        child.wait()
    end = time.monotonic() + 0.6
    while time.monotonic() < end:  # this process busy: not counted
        pass
    ours = sampler.others()
    # the machine may be shared: others' load is bounded by the cores, so compare with what was left
    assert busy >= min(sampler.cores, quiet + 0.6) - 0.15, (quiet, busy)
    assert 0.0 <= ours <= sampler.cores - 0.4, ours  # this process took a core's share: not others'


def test_governor_override_can_be_set_and_lifted():
    """The bench fixes every core for one condition, then follows the load again."""
    clock, load, set_calls = Clock(), ScriptedLoad([1.0, 1.0]), []
    gov = ThreadGovernor(set_calls.append, sampler=load, clock=clock)
    assert gov.apply() == Threads(1, 1)
    gov.set_override(2)
    assert gov.apply() == Threads(2, 2) and load.calls == 1
    clock.now += 10 * REFRESH
    assert gov.apply() == Threads(2, 2) and load.calls == 1
    gov.set_override(None)
    assert gov.apply() == Threads(1, 1) and load.calls == 2
    assert set_calls == [Threads(1, 1), Threads(2, 2), Threads(1, 1)]
