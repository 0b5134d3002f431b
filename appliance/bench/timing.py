"""Latency figures shared by ``bench.tools`` and ``bench.trials``: calls timed over stdio, p50/p95.

Invariant: only answers are timed; a failed call is counted by its error type and reported next
to the figures, never folded into them (a fast failure is not a fast tool).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

DEADLINE = 30.0


@dataclass
class Timing:
    """Latencies of the answered calls and the error types of the failed ones."""

    seconds: list[float] = field(default_factory=list)
    failures: Counter = field(default_factory=Counter)

    def record(self, outcome, elapsed: float, *, answers: tuple[str, ...] = ()) -> None:
        """Time ``outcome`` when it is ok or its error type is one of ``answers`` (such as a
        filtered search's ``not_found``: the server did the whole search to say so)."""
        if outcome.ok or outcome.error_type in answers:
            self.seconds.append(elapsed)
        else:
            self.failures[outcome.error_type or "unknown"] += 1

    def summary(self) -> dict:
        failed = sum(self.failures.values())
        figures = percentiles(self.seconds) if self.seconds else {"p50_ms": None, "p95_ms": None}
        out = {"n": len(self.seconds) + failed, "ok": len(self.seconds), "failed": failed,
               "p50_ms": figures["p50_ms"], "p95_ms": figures["p95_ms"]}
        if self.failures:
            out["errors"] = dict(sorted(self.failures.items()))
        return out


def percentiles(samples: list[float]) -> dict:
    """p50 and p95 in ms (p95: the nearest rank)."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered) * 1000, 2), "p95_ms": round(p95 * 1000, 2)}


def time_calls(box, server: str, tool: str, args_list: list[dict]) -> Timing:
    """Call ``tool`` once per argument set; time the successes, count the failures."""
    timing = Timing()
    for args in args_list:
        started = time.perf_counter()
        outcome = box.call_server(server, tool, args, DEADLINE)
        timing.record(outcome, time.perf_counter() - started)
    return timing
