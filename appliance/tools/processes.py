"""The MCP servers' processes, seen from the client: find one, tell whether it lives, end it.

The stdio transport (fastmcp over the MCP SDK) starts each server in a session of its own and
does not expose the process, so the client marks each start with a token in the server's
environment (``TOKEN_ENV``) and finds the child that carries it.

Invariants:
- Only children of this process are ever looked at or signalled, and only the one carrying the
  token of the start in question: never a process found by name.
- ``kill`` sends SIGKILL to the server's process group (the server leads its own session, so
  the group is the server and anything it started): a stopped or hung server cannot finish
  what it was doing after the client gave up on it. ``wait_gone`` returns once the process
  has exited and been reaped (the transport reaps it) or reports that it has not.
- Without ``/proc`` (not Linux) nothing is found; the caller falls back on the transport's own
  shutdown (close stdin, then SIGTERM and SIGKILL to the group).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from common import environment

TOKEN_ENV = environment.MCP_START
PROC = Path("/proc")


def _parent_and_state(pid: int) -> tuple[int, str] | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), fields[0]


def find_child(token: str) -> int | None:
    """The pid of this process's child whose environment holds ``TOKEN_ENV=token``, or None."""
    if not PROC.is_dir():
        return None
    me, marker = os.getpid(), f"{TOKEN_ENV}={token}".encode()
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        info = _parent_and_state(int(entry.name))
        if info is None or info[0] != me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            return int(entry.name)
    return None


def alive(pid: int) -> bool:
    """Whether ``pid`` is still a running (or stopped) child: not exited, not a zombie."""
    if PROC.is_dir():
        info = _parent_and_state(pid)
        return info is not None and info[0] == os.getpid() and info[1] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill(pid: int) -> None:
    """SIGKILL the server's process group (it leads its own), or the process alone."""
    if not alive(pid):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``pid`` to be gone; whether it is."""
    end = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True
