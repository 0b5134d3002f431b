"""The fault drill ``appliance selftest`` runs: real faults in a real MCP server during real calls.

Each fault hits the EHR server that the agent's own client (``MCPToolBox``) started on the
given data home (the selftest's scratch home, never the live one):
- ``crash_mid_call``: the server is stopped (SIGSTOP) so the request waits in its pipe, then
  killed under it;
- ``hang_past_deadline``: the server is stopped and never answers;
- ``killed_between_calls``: the server is killed while idle, before the next call.

Invariant: a fault counts as survived only when the call it hit came back as an outcome (never
an exception) within its deadline plus a margin, as an error for the two mid-call faults; the
server it hit is gone (the client killed and reaped it); and the next call succeeds on a new
server. Garbage on the MCP channel needs a wrapped server and is tested in
tests/slow/test_mcp_faults.py, not here.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from appliance.tools import processes

DEADLINE = 2.0  # seconds for the faulted call (the agent's default is 10)
MARGIN = 5.0  # giving up on a server (kill, reap) may take this long beyond the deadline
KINDS = ("crash_mid_call", "hang_past_deadline", "killed_between_calls")
CHART = ("get_patient_chart", {"patient_id": "abc-123"})


def _fault(kind: str, pid: int) -> None:
    if kind == "killed_between_calls":
        os.kill(pid, signal.SIGKILL)
        processes.wait_gone(pid, 5)
        return
    os.kill(pid, signal.SIGSTOP)  # hangs: neither answers nor dies
    if kind == "crash_mid_call":
        threading.Timer(0.5, processes.kill, (pid,)).start()  # ... and dies while the call waits


def _one(box, kind: str) -> dict:
    warm = box.call("search_patient", {"name": "Smith"}, 10)
    pid = box.server_pid("ehr")
    if not warm.ok or pid is None:
        return {"kind": kind, "survived": False, "why": "no live server before the fault"}
    _fault(kind, pid)
    started = time.monotonic()
    try:
        hit = box.call(*CHART, DEADLINE)
    except Exception as exc:  # noqa: BLE001 - exactly what the drill is looking for
        return {"kind": kind, "survived": False, "why": f"the faulted call raised {type(exc).__name__}"}
    seconds = time.monotonic() - started
    after = box.call(*CHART, 10)
    checks = {
        "outcome in time": seconds <= DEADLINE + MARGIN,
        "error reported": hit.ok if kind == "killed_between_calls" else not hit.ok,
        "old server gone": processes.wait_gone(pid, MARGIN),
        "next call answered by a new server": after.ok and box.server_pid("ehr") not in (None, pid),
    }
    failed = [name for name, ok in checks.items() if not ok]
    return {"kind": kind, "survived": not failed, "error_type": hit.error_type, "seconds": round(seconds, 2),
            "why": "; ".join(failed) or None}


def fault_drill(home: Path, rounds: int = 2) -> dict:
    """``rounds`` of every fault kind; ``tried``, ``survived``, per kind, and each fault's details."""
    from appliance.tools.mcp_client import MCPToolBox

    details = []
    with MCPToolBox(env={"APPLIANCE_HOME": str(home)}) as box:
        for _ in range(rounds):
            details += [_one(box, kind) for kind in KINDS]
    by_kind = {k: sum(d["survived"] for d in details if d["kind"] == k) for k in KINDS}
    return {"tried": len(details), "survived": sum(d["survived"] for d in details), "survived_by_kind": by_kind,
            "details": details}
