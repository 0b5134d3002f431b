"""The thresholds a model must meet to be accepted at a site, all in one place, each with its
reason, and the verdict they give.

A figure meets its threshold on its point estimate (the 95% interval is reported beside it).
A run that did not measure everything (``--limit``, a job that did not finish) is never
"accepted": a part of the set cannot vouch for the whole.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Threshold:
    part: str  # "nodes", "turns" or an evaluation's name
    figure: str  # the key in that part's figures
    value: float
    at_least: bool  # True: the figure must be >= value; False: <= value
    short: str  # its name in the acceptance line
    reason: str


THRESHOLDS: tuple[Threshold, ...] = (
    # the agent's model calls (accuracy of the model's own answers)
    Threshold("nodes", "intent.accuracy", 0.90, True, "intent",
              "a DIRECT label answers a patient question from memory: at most 1 in 10 sent the wrong way"),
    Threshold("nodes", "tool.accuracy", 0.85, True, "tools",
              "a wrong tool costs a step of four and a retry; most requests must reach the right source first"),
    Threshold("nodes", "arguments.accuracy", 0.85, True, "arguments",
              "a wrong drug or patient in a call is caught by code only when code can read it"),
    # No threshold for RESULT_CLASSIFY: code labels every result it can read (all but an image
    # analysis, which the acceptance set does not hold); its records say "by code".
    Threshold("nodes", "retry.accuracy", 0.70, True, "retry",
              "a wrong retry choice costs one retry of a bounded two; it never writes"),
    *(Threshold("nodes", f"{node}.valid", 1.0, True, f"{node} valid",
                "every constrained output must parse: anything less is a runtime fault, not a weak model")
      for node in ("intent", "tool", "arguments", "retry")),
    *(Threshold("nodes", f"{node}.p95_seconds", limit, False, f"{node} p95 s",
                "a clinician waits for each step: beyond this a turn of five calls and its answer takes minutes")
      for node, limit in (("intent", 30.0), ("tool", 45.0), ("retry", 20.0))),
    # whole turns
    Threshold("turns", "path.accuracy", 0.80, True, "turn paths",
              "the path decides which sources an answer rests on"),
    Threshold("turns", "fact_guard.accuracy", 0.90, True, "fact guard",
              "an answer naming facts no source held is withheld: more than 1 in 10 leaves clinicians without answers"),
    Threshold("turns", "shown.accuracy", 0.80, True, "answers shown",
              "an answer code replaces (empty, scaffolding, unsupported) is the model adding nothing to the sources"),
    # the jobs
    Threshold("trialgpt", "accuracy", 0.70, True, "trialgpt accuracy",
              "GPT-4 reaches 0.88 on the same rows; below 0.70 a prescreen misleads more than it helps"),
    Threshold("trialgpt", "kappa", 0.50, True, "trialgpt kappa",
              "moderate agreement with the experts beyond chance (GPT-4: 0.75)"),
    Threshold("grounding", "grounded_share", 0.60, True, "grounded",
              "most criterion entities must reach a code without expert review for grounding to save work"),
    Threshold("extraction", "recall", 0.80, True, "extraction recall",
              "a criterion the extraction misses is never screened"),
    Threshold("extraction", "invented_share", 0.15, False, "invented",
              "an invented criterion can exclude an eligible patient"),
)

# The figures the acceptance line names, in its order.
LINE_FIGURES = ("intent", "tools", "arguments", "retry", "turn paths", "fact guard", "answers shown",
                "trialgpt kappa", "grounded", "extraction recall")


def figure_of(figures: dict, t: Threshold):
    """The figure a threshold reads from a run's figures (None when it was not measured)."""
    if t.part == "nodes":
        value = figures.get("nodes", {}).get("nodes", {})
    elif t.part == "turns":
        value = figures.get("turns", {})
    else:
        value = figures.get("evaluations", {}).get(t.part, {})
    for key in t.figure.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _met(t: Threshold, got) -> bool:
    return got is not None and (got >= t.value if t.at_least else got <= t.value)


def verdict(figures: dict, *, complete: bool) -> dict:
    """{"accepted", "reasons", "checks"} for a run's figures: every threshold, the figure it
    read and whether it was met (a figure not measured is not met)."""
    checks = [(t, figure_of(figures, t)) for t in THRESHOLDS]
    reasons = [f"{t.short} {'not measured' if got is None else round(got, 2)} (needs {'>=' if t.at_least else '<='} {t.value})"
               for t, got in checks if not _met(t, got)]
    if not complete:
        reasons.insert(0, "a partial run (--limit, or a job that did not finish) cannot accept a model")
    return {"accepted": not reasons, "reasons": reasons,
            "checks": [{"part": t.part, "figure": t.figure, "short": t.short, "value": got, "threshold": t.value,
                        "at_least": t.at_least, "met": _met(t, got), "reason": t.reason} for t, got in checks]}
