"""``appliance prescreen PATIENT_ID``: is this patient eligible for any trials in the local cache?

Invariants:
- The chart is read before the model loads, so an unknown or malformed patient ID fails at
  once with one line and exit 2 (``PrescreenError`` is an ``ApplianceError``, turned into the
  message and exit code by ``appliance.cli``).
- ``--json`` prints one object: ``{"patient_facts": ..., "trials": [...], ...}``; otherwise the
  text report of ``prescreen.run.render_text``. Progress goes to stderr (a terminal only), so
  stdout stays the result.
- ``--script FILE`` replaces the model with a scripted one (keys ``PRESCREEN_SEARCH``,
  ``CRITERION_INCLUSION``, ``CRITERION_EXCLUSION``; optional ``tools`` outcomes, as ``ask --script``).
"""

from __future__ import annotations

import argparse
import json

from appliance.cli_support import ProgressBar, load_script, settings_from

STATUSES = ("recruiting", "active", "completed", "any")


def register(sub) -> None:
    p = sub.add_parser("prescreen", help="check a patient against the eligibility criteria of matching trials")
    p.add_argument("patient_id", metavar="PATIENT_ID")
    p.add_argument("--condition", metavar="TEXT", help="the condition to search trials for (default: the patient's "
                                                       "active problems, then the model's proposals)")
    p.add_argument("--max-trials", type=int, default=5, metavar="N", help="trials to judge (1-20, default 5)")
    p.add_argument("--status", choices=STATUSES, default="recruiting", help="trial status to search (default recruiting)")
    p.add_argument("--json", action="store_true", help="print one JSON object: patient_facts, trials, search, stats")
    p.add_argument("--model", help="model profile (default: gemma3-270m)")
    p.add_argument("--script", help="JSON file of scripted model outputs (and optional tool outcomes)")
    p.set_defaults(func=cmd_prescreen)


def cmd_prescreen(args: argparse.Namespace) -> int:
    from appliance.prescreen.evaluate import NODES
    from appliance.prescreen.run import (
        MAX_TRIALS_LIMIT, PrescreenBadArguments, read_facts, render_text, run_prescreen,
    )
    from appliance.prescreen.search import PROPOSE_NODE
    from appliance.tools.mcp_client import MCPToolBox

    settings = settings_from(args)
    script = load_script(args.script, [PROPOSE_NODE, *NODES.values(), "tools"]) if args.script else None
    if not 1 <= args.max_trials <= MAX_TRIALS_LIMIT:
        raise PrescreenBadArguments(f"--max-trials must be between 1 and {MAX_TRIALS_LIMIT}")
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
                                   deadline=settings.tool_deadline_seconds, progress=bar.note)
        finally:
            bar.close()
    print(json.dumps(result.to_json(), indent=2) if args.json else render_text(result))
    return 0


def _model(settings, script: dict | None):
    if script is not None:
        from appliance.llm.fake import ScriptedModel

        return ScriptedModel({k: v for k, v in script.items() if k != "tools"})
    from appliance.runtime import load_model

    return load_model(settings)


__all__ = ["register", "cmd_prescreen"]
