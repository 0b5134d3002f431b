"""The figures of an acceptance run, computed from its rows alone: accuracy with a 95% Wilson
interval, schema validity and latency (median, p95) per node.

Invariant: pure functions over row dicts (``nodes.jsonl``'s lines), so every figure in a
result can be recomputed from the run directory.
"""

from __future__ import annotations

import math
import statistics

Z95 = 1.959963984540054  # the two-sided 95% normal quantile
# The figures the node rows carry, with the node each one measures (docs/design.md §2).
NODE_FIGURES = {
    "intent": "INTENT_CLASSIFY",
    "tool": "TOOL_SELECT (stage 1, both stages timed)",
    "arguments": "TOOL_SELECT stage 2 (key arguments)",
    "result": "RESULT_CLASSIFY",
    "retry": "ERROR_HANDLER (retry choice)",
}


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (None for no trials)."""
    if n == 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0-100) of ``values``."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def proportion(successes: int, n: int) -> dict:
    return {"n": n, "correct": successes, "accuracy": round(successes / n, 4) if n else None,
            "interval95": wilson(successes, n)}


def node_figures(rows: list[dict]) -> dict:
    """Per figure: accuracy over the calls the model decided, validity over every call made,
    latency over the calls made (seconds), and how many calls code decided instead."""
    out = {}
    for key in NODE_FIGURES:
        calls = [r["nodes"][key] for r in rows if key in r.get("nodes", {})]
        by_model = [c for c in calls if c.get("by") != "code"]
        timed = [c["seconds"] for c in by_model if c.get("seconds") is not None]
        out[key] = {
            **proportion(sum(1 for c in by_model if c["correct"]), len(by_model)),
            "valid": round(sum(1 for c in by_model if c["valid"]) / len(by_model), 4) if by_model else None,
            "invalid": sum(1 for c in by_model if not c["valid"]),
            "decided_by_code": len(calls) - len(by_model),
            "median_seconds": round(statistics.median(timed), 3) if timed else None,
            "p95_seconds": round(percentile(timed, 95), 3) if timed else None,
        }
    by_source = {}
    for source in sorted({r.get("source", "written") for r in rows}):
        part = [c for r in rows if r.get("source") == source for c in r.get("nodes", {}).values()
                if c.get("by") != "code"]
        by_source[source] = proportion(sum(1 for c in part if c["correct"]), len(part))
    return {"nodes": out, "by_source": by_source, "cases": len(rows)}


def turn_figures(rows: list[dict]) -> dict:
    """Whole turns: the path (the tools called, in order, and the intent); the fact guard (of
    the model's answers that reached it, those naming no fact a source lacked); and the answers
    shown in the model's words (neither replaced as unusable, ``answer_problem``, nor withheld)."""
    answered = [r for r in rows if r.get("model_answer")]
    checked = [r for r in answered if not r.get("fallback")]  # the guard reads answers code did not replace
    path_right = sum(1 for r in rows if r["path_correct"])
    unsupported = sum(1 for r in checked if r["withheld"])
    seconds = [r["seconds"] for r in rows]
    return {
        "path": proportion(path_right, len(rows)),
        "fact_guard": {**proportion(len(checked) - unsupported, len(checked)),
                       "answers_withheld": unsupported, "model_answers": len(answered)},
        "shown": proportion(len(checked) - unsupported, len(answered)),
        "fallbacks": sum(1 for r in rows if r.get("fallback")),
        "errors": sum(1 for r in rows if r.get("error")),
        "median_seconds": round(statistics.median(seconds), 3) if seconds else None,
        "p95_seconds": round(percentile(seconds, 95), 3) if seconds else None,
    }
