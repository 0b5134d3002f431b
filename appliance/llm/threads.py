"""How many threads each llama.cpp call gets: the cores free now, never more.

llama.cpp's threads meet at a barrier after every operation of a model step, so one thread the
scheduler has set aside (another process holds its core) stalls all the others: on 2 cores with
one CPU-bound process beside it, a turn with 2 threads took 12.7x as long as idle; with 1 thread,
1.5x. So a call asks for no more threads than there are free cores.

Invariants:
- ``choose`` is a pure function (cores, the other processes' load in cores, the operator's
  override) -> ``Threads(decode, batch)``. Without an override both lie in [1, cores] and never
  exceed the free cores; a core counts as free while others use at most ``SLACK`` of it. The
  override (``APPLIANCE_N_THREADS``, ``Settings.n_threads``) is taken as given, at least 1.
- Decode (one token a step) and batch (prefill, fixed text, several sequences a step) get the
  same count: a prefill op on this model is about a millisecond, shorter than a scheduler time
  slice, so a batch thread waiting for a busy core stalls the step as a decode thread does.
- The load is measured, not guessed (``CpuSampler``): /proc/stat's busy time of the CPUs this
  process may run on (``os.sched_getaffinity``), minus this process's own CPU time over the same
  interval (``os.times``), so our own threads never count as load. A window is at least
  ``MIN_WINDOW`` seconds. With no recent window (the first call, or after ``STALE`` seconds
  without one) the first figure is /proc/loadavg's count of runnable tasks, less this
  process's own runnable threads (/proc/self/task), until a window has passed. The one-minute
  load average is not used: it trails a process that starts or stops by a minute.
- The batch runner's context follows too: the runtime sets its threads before each of its steps.
- The cores are those of the affinity mask, bounded by a cgroup v2 quota (``cpu.max``) when set.
- Without /proc (not Linux) the others' load reads as zero: every core, as before.
- ``ThreadGovernor.apply`` is cheap (a clock read; /proc at most every ``REFRESH`` seconds) and
  is called by the runtime under its model lock, at each call's start and before each eval, so a
  long answer follows load that starts or ends while it runs.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SLACK = 0.25  # a core others use this much of still counts as free
MIN_WINDOW = 0.25  # seconds of /proc/stat between two load figures (USER_HZ is 100: +-0.1 core at worst)
STALE = 2.0  # seconds after which a window is too old to describe now
REFRESH = 0.5  # seconds between two thread decisions within a call


@dataclass(frozen=True)
class Threads:
    decode: int  # llama.cpp's n_threads: steps of one token
    batch: int  # n_threads_batch: steps of several tokens (prefill, fixed text, batched sequences)


def choose(cores: int, others: float, override: int | None = None) -> Threads:
    """The threads for the next model steps, given ``cores`` this process may use and the other
    processes' load ``others`` (in cores, e.g. 1.0 for one CPU-bound process)."""
    if override is not None:
        n = max(1, int(override))
        return Threads(n, n)
    cores = max(1, int(cores))
    taken = max(0, math.ceil(max(0.0, others) - SLACK - 1e-9))
    free = min(cores, max(1, cores - taken))
    return Threads(free, free)


HOST_NICE = -10  # the host's llama-server niceness when it may raise its priority (CFS weight ~9x a normal process)


def host_threads(cores: int, override: int | None = None, raised: bool = True) -> Threads:
    """llama-server's ``--threads`` and ``--threads-batch`` on a clinic host, fixed for the
    server's life (it cannot change them per request, so the per-call policy above cannot apply).
    On 4 cores or more, decode leaves one core to the host's own servers (the model front, three
    MCP servers, the OS), so a request they serve never stalls a model step; batch steps (several
    slots at once) use every core. On 2-3 cores it depends on ``raised``: when llama-server runs
    at ``HOST_NICE`` (``may_raise_priority``), a busy process beside it gets a tenth of a core's
    time and every core is the host's; when it cannot, decode keeps one core free (1 thread on 2
    cores): measured on 2 cores, 1 thread decodes about 8% slower idle but keeps its speed beside
    a busy process, where 2 threads at normal priority lose 2.5x. ``APPLIANCE_N_THREADS`` wins."""
    if override is not None:
        n = max(1, int(override))
        return Threads(n, n)
    cores = max(1, int(cores))
    if cores >= 4:
        return Threads(cores - 1, cores)
    return Threads(cores if raised else max(1, cores - 1), cores)


def may_raise_priority() -> bool:
    """Whether a process started from this one may run at ``HOST_NICE``: asked of the kernel by a
    child that tries (root, a service granted CAP_SYS_NICE or an RLIMIT_NICE; a user namespace's
    root may not, whatever its capability mask says)."""
    import subprocess
    import sys

    try:
        return subprocess.run([sys.executable, "-c", f"import os; os.setpriority(os.PRIO_PROCESS, 0, {HOST_NICE})"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# -- reading the machine ------------------------------------------------------------------------
def usable_cores(affinity: set[int] | None = None, cpu_max: str | None = None) -> int:
    """The CPUs this process may run on, bounded by a cgroup v2 quota ("QUOTA PERIOD" or "max ...")."""
    if affinity is None:
        try:
            affinity = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            affinity = set(range(os.cpu_count() or 1))
    cores = max(1, len(affinity))
    if cpu_max is None:
        try:
            cpu_max = Path("/sys/fs/cgroup/cpu.max").read_text()
        except OSError:
            cpu_max = ""
    parts = cpu_max.split()
    if len(parts) == 2 and parts[0] != "max":
        try:
            cores = min(cores, max(1, math.floor(int(parts[0]) / int(parts[1]))))
        except (ValueError, ZeroDivisionError):
            pass
    return cores


def busy_jiffies(stat_text: str, cpus: set[int] | None) -> int | None:
    """Busy time (user, nice, system, irq, softirq, steal) summed over ``cpus`` (all when None)
    from /proc/stat's text; None when no CPU line is found."""
    total, found = 0, False
    for line in stat_text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        try:
            cpu = int(name[3:])
            values = [int(v) for v in fields[:8]]
        except ValueError:
            continue
        if cpus is not None and cpu not in cpus:
            continue
        values += [0] * (8 - len(values))
        user, nice, system, _idle, _iowait, irq, softirq, steal = values
        total += user + nice + system + irq + softirq + steal
        found = True
    return total if found else None


def runnable_others(loadavg_text: str, own_running: int = 1) -> float:
    """Other processes' runnable tasks right now from /proc/loadavg ("0.5 0.4 0.3 R/T PID"),
    less ``own_running`` (this process's runnable threads, the reader among them)."""
    try:
        running = int(loadavg_text.split()[3].split("/")[0])
    except (IndexError, ValueError):
        return 0.0
    return float(max(0, running - max(1, own_running)))


def own_running_threads(task_dir: Path = Path("/proc/self/task")) -> int:
    """This process's threads in state R (at least 1: the one asking)."""
    running = 0
    try:
        for task in task_dir.iterdir():
            try:
                running += (task / "stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
            except (OSError, IndexError):
                continue
    except OSError:
        pass
    return max(1, running)


@dataclass
class CpuSampler:
    """The other processes' load in cores, from /proc (see the module's invariants)."""

    cores: int = field(default_factory=usable_cores)
    clock: Callable[[], float] = time.monotonic
    stat_path: Path = Path("/proc/stat")
    loadavg_path: Path = Path("/proc/loadavg")
    own_seconds: Callable[[], float] = lambda: sum(os.times()[:2])

    def __post_init__(self) -> None:
        try:
            self._cpus: set[int] | None = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            self._cpus = None
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._ref: tuple[float, int, float] | None = None  # (when, busy jiffies, own CPU seconds)
        self._estimate = 0.0

    def _read(self, path: Path) -> str:
        try:
            return path.read_text()
        except OSError:
            return ""

    def others(self) -> float:
        now = self.clock()
        busy = busy_jiffies(self._read(self.stat_path), self._cpus)
        if busy is None:
            return 0.0
        own = self.own_seconds()
        if self._ref is None or now - self._ref[0] > STALE:
            self._ref = (now, busy, own)
            self._estimate = min(float(self.cores), runnable_others(self._read(self.loadavg_path),
                                                                    own_running_threads()))
        elif now - self._ref[0] >= MIN_WINDOW:
            when, busy_before, own_before = self._ref
            used = (busy - busy_before) / self._hz - (own - own_before)
            self._estimate = max(0.0, used / (now - when))
            self._ref = (now, busy, own)
        return self._estimate


class ThreadGovernor:
    """Chooses the threads and hands a change to ``set_threads``; counts what it chose."""

    def __init__(self, set_threads: Callable[[Threads], None], override: int | None = None,
                 sampler: CpuSampler | None = None, clock: Callable[[], float] = time.monotonic):
        self._set = set_threads
        self.override = override
        self.sampler = sampler if sampler is not None or override is not None else CpuSampler()
        self._clock = clock
        self.current: Threads | None = None
        self._checked = -math.inf
        self.chosen: dict[int, int] = {}  # decode threads -> decisions that chose them (for the bench)

    def set_override(self, override: int | None) -> None:
        """Fix the count (or, with None, follow the load again) from the next ``apply`` on."""
        if override is None and self.sampler is None:
            self.sampler = CpuSampler()
        self.override = override
        self._checked = -math.inf

    def apply(self) -> Threads:
        """The threads for the steps about to run (set in llama.cpp when they change)."""
        now = self._clock()
        if self.current is not None and now - self._checked < (math.inf if self.override is not None else REFRESH):
            return self.current
        self._checked = now
        if self.override is not None:
            threads = choose(1, 0.0, self.override)
        else:
            threads = choose(self.sampler.cores, self.sampler.others())
        self.chosen[threads.decode] = self.chosen.get(threads.decode, 0) + 1
        if threads != self.current:
            self._set(threads)
            self.current = threads
        return threads
