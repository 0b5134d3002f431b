"""Processes that keep the machine busy while the contention bench times turns.

Invariants:
- Every process is a child of this one, started with a parent-death signal (SIGKILL, Linux's
  ``PR_SET_PDEATHSIG``), so it dies with the bench even when the bench is killed outright.
- ``busy`` stops its processes when its block ends, however it ends (SIGTERM, then SIGKILL after
  a grace period), and ``stoppable`` turns SIGTERM and SIGHUP into an exception in the main
  thread, so those exit paths run the ``finally`` too. Nothing outlives the bench.
- A CPU-bound process is a Python loop (one core each); a model process loads the same model
  as the bench (same settings and thread policy, from the environment) and decodes free text in
  a loop; ``busy`` returns only when each has said it is ready.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from appliance.errors import ApplianceError
from common.locations import PROJECT_ROOT

# Set the parent-death signal first (before the heavy imports of a model process).
_PREAMBLE = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the bench is already gone
"""

CPU_LOOP = _PREAMBLE + """
print("ready", flush=True)
while True:
    pass
"""

MODEL_LOOP = _PREAMBLE + """
from appliance.config import Settings
from appliance.llm.prompt import Message
from appliance.runtime import load_model

model = load_model(Settings(model_server=None))
print("ready", flush=True)
i = 0
while True:
    model.generate_free("BENCH", [Message("user", f"Write a discharge summary for patient {i}.")],
                        temperature=0.5, max_tokens=256)
    i += 1
"""

READY_SECONDS = 180  # a model process loads the model before it is ready


@contextmanager
def busy(cpu: int = 0, models: int = 0, env: dict[str, str] | None = None) -> Iterator[list[int]]:
    """``cpu`` CPU-bound processes and ``models`` model processes (``env``: their environment,
    default this process's) beside this block; yields their pids and stops them all when the
    block ends."""
    procs: list[subprocess.Popen] = []
    try:
        for script in [CPU_LOOP] * cpu + [MODEL_LOOP] * models:
            procs.append(subprocess.Popen([sys.executable, "-c", script, str(os.getpid())], cwd=PROJECT_ROOT, env=env,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True))
        deadline = time.monotonic() + READY_SECONDS
        for proc in procs:  # a model process answers once its model is loaded
            waited, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not waited or proc.stdout.readline().strip() != "ready":
                raise ApplianceError("a busy process for the contention bench did not start")
        yield [p.pid for p in procs]
    finally:
        stop(procs)


def stop(procs: list[subprocess.Popen], grace: float = 5.0) -> None:
    """Terminate each process, kill what is left after ``grace`` seconds, reap them all."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


class Stopped(ApplianceError):
    """The bench was asked to stop (SIGTERM or SIGHUP)."""


@contextmanager
def stoppable() -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``Stopped`` in the main thread for this block (then the
    handlers before it return), so every ``finally`` inside runs."""
    def raise_stopped(signum, _frame):
        raise Stopped(f"the contention bench was stopped ({signal.Signals(signum).name})")

    previous = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, raise_stopped)
    except ValueError:  # not the main thread: the caller's own handling stands
        pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
