"""``appliance prescreen PATIENT_ID``: is this patient eligible for any trials in the local cache?

Invariants:
- The chart is read before the model loads, so an unknown or malformed patient ID fails at
  once with one line and exit 2 (``PrescreenError`` is an ``ApplianceError``, turned into the
  message and exit code by ``appliance.cli``).
- ``--json`` prints one object: ``{"patient_facts": ..., "trials": [...], ...}``, each
  criterion with ``decided_by`` ("code" or "model") and the ``cited_facts`` it rests on;
  otherwise the text report of ``prescreen.run.render_text`` (verdicts first, the disclaimer
  once). Progress goes to stderr (a terminal only), so stdout stays the result.
- ``--as-of DATE`` reads dated criteria ("within 3 months") against that day instead of today
  (the demo record is written as of 2026-11-01).
- ``--script FILE`` replaces the model with a scripted one (keys ``PRESCREEN_SEARCH``,
  ``CRITERION_INCLUSION``, ``CRITERION_EXCLUSION``; optional ``tools`` outcomes, as ``ask --script``).
- ``appliance eval trialgpt [FILE]`` checks the annotation file (or the run directory it
  resumes) before the model loads; ``--json`` prints the metrics object, otherwise a table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from appliance.cli import options
from appliance.cli.options import EVAL_HELP, Tree
from appliance.cli.support import ProgressBar, load_script, model_from, settings_from

STATUSES = ("recruiting", "active", "completed", "any")


def register(tree: Tree) -> None:
    """``appliance prescreen`` and ``appliance eval trialgpt``."""
    p = tree.command("prescreen", "check a patient against the eligibility criteria of matching trials", cmd_prescreen)
    p.add_argument("patient_id", metavar="PATIENT_ID")
    p.add_argument("--condition", metavar="TEXT", help="the condition to search trials for (default: the patient's "
                                                       "active problems, then the model's proposals)")
    p.add_argument("--max-trials", type=int, default=5, metavar="N", help="trials to judge (1-20, default 5)")
    p.add_argument("--status", choices=STATUSES, default="recruiting", help="trial status to search (default recruiting)")
    options.json_output(p, "print one JSON object: patient_facts, trials (each criterion with decided_by and "
                           "cited_facts), search, stats")
    p.add_argument("--as-of", metavar="YYYY-MM-DD", help="the day dated criteria are read against (default: today)")
    options.model(p)
    options.script(p, "JSON file of scripted model outputs (and optional tool outcomes)")

    ev = tree.group("eval", EVAL_HELP, dest="what").command(
        "trialgpt", "criterion-level accuracy on TrialGPT's expert annotations (and GPT-4's)", cmd_eval_trialgpt)
    ev.add_argument("file", nargs="?", metavar="FILE",
                    help="criterion annotations JSON (default: ../shared/data/trialgpt/criterion_annotations_dev.json)")
    options.limit(ev)
    options.run_dir(ev, recompute=True)
    ev.add_argument("--parallel", type=int, default=8, metavar="N",
                    help="criteria decoded side by side (1: one after another; default 8)")
    options.json_output(ev, "print one JSON object of metrics")
    options.model(ev)
    options.script(ev, "JSON file of scripted outputs keyed by CRITERION_INCLUSION / CRITERION_EXCLUSION")


def cmd_prescreen(args: argparse.Namespace) -> int:
    from appliance.prescreen.judge import NODES
    from appliance.prescreen.run import (
        MAX_TRIALS_LIMIT,
        PrescreenBadArguments,
        read_facts,
        render_text,
        run_prescreen,
    )
    from appliance.prescreen.search import PROPOSE_NODE
    from appliance.tools.mcp_client import MCPToolBox

    settings = settings_from(args)
    script = load_script(args.script, [PROPOSE_NODE, *NODES.values(), "tools"]) if args.script else None
    if not 1 <= args.max_trials <= MAX_TRIALS_LIMIT:
        raise PrescreenBadArguments(f"--max-trials must be between 1 and {MAX_TRIALS_LIMIT}")
    today = _as_of(args.as_of, PrescreenBadArguments)
    real = MCPToolBox()
    with real:
        tools = real
        if script is not None:
            from appliance.tools.scripted import ScriptedToolBox

            tools = ScriptedToolBox(script.get("tools", {}), real)
        read_facts(tools, args.patient_id, settings.tool_deadline_seconds)  # fails fast, before the model loads
        model = _model(settings, script)
        bar = ProgressBar()
        try:
            result = run_prescreen(model, tools, args.patient_id, condition=args.condition,
                                   max_trials=args.max_trials, status=args.status,
                                   deadline=settings.tool_deadline_seconds, progress=bar.note, today=today)
        finally:
            bar.close()
    print(json.dumps(result.to_json(), indent=2) if args.json else render_text(result))
    return 0


def _as_of(text: str | None, error):
    if not text:
        return None
    from datetime import date

    try:
        return date.fromisoformat(text)
    except ValueError:
        raise error(f"--as-of must be a date as YYYY-MM-DD, not {text!r}") from None


def _model(settings, script: dict | None):
    if script is not None:
        from appliance.llm.fake import ScriptedModel

        return ScriptedModel({k: v for k, v in script.items() if k != "tools"})
    from appliance.runtime import load_model

    return load_model(settings)


def cmd_eval_trialgpt(args: argparse.Namespace) -> int:
    from appliance.prescreen import trialgpt
    from appliance.prescreen.judge import NODES
    from common.locations import new_run_dir

    if args.recompute:
        metrics = trialgpt.metrics_from_run(Path(args.recompute))
        print(json.dumps(metrics, indent=2) if args.json else trialgpt.format_metrics(metrics))
        return 0
    if args.limit is not None and args.limit < 1:
        raise trialgpt.TrialGPTDataError("--limit must be at least 1")
    if not 1 <= args.parallel <= 16:
        raise trialgpt.TrialGPTDataError("--parallel must be between 1 and 16")
    data, limit = Path(args.file) if args.file else trialgpt.DEFAULT_DATA, args.limit
    if args.resume:  # the run's own file and limit, unless given again (then they must agree)
        config = trialgpt.read_config(Path(args.resume))
        data = data if args.file else Path(config["data"])
        limit = limit if args.limit is not None else config.get("limit")
    trialgpt.load_rows(data)  # a file that is not the format is refused before the model loads
    model = model_from(args, NODES.values())
    run_dir = Path(args.resume) if args.resume else new_run_dir("trialgpt", Path(args.out) if args.out else None)
    bar = ProgressBar()
    try:
        metrics = trialgpt.run_trialgpt(
            model, run_dir, data=data, limit=limit, resume=bool(args.resume), parallel=args.parallel,
            progress=lambda done, total, accuracy, left: bar.show(
                "trialgpt", done, total, f"accuracy {accuracy:.2f}, {left / 60:.1f} min left"))
    finally:
        bar.close()
    print(json.dumps(metrics, indent=2) if args.json else trialgpt.format_metrics(metrics))
    return 0


__all__ = ["register", "cmd_prescreen", "cmd_eval_trialgpt"]
