"""``appliance model accept``: measure the installed model on the appliance's own jobs and record
the verdict with the model file's sha256 (``appliance.acceptance``; README "Model acceptance").

Invariants:
- The case set and the model file are checked before the model loads; a problem is one line,
  exit 2 (``ApplianceError``). Exit 0: accepted; exit 1: not accepted (a check that failed).
- Whole turns and the grounding evaluation run in a scratch data home built from the shipped
  content (``common.locations.scratch_home``), so the run never reads or writes the clinic's
  record and every site measures on the same data; the run directory and the result live in
  the real data home (``runs/accept-*``, ``acceptance/``).
- Progress goes to stderr, on a terminal only; ``--json`` prints the result object on stdout.
- ``--resume RUN_DIR`` finishes a stopped run without redoing its finished cases and rows.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from pathlib import Path

from appliance.cli import options
from appliance.cli.options import Tree
from appliance.cli.support import ProgressBar, settings_from
from appliance.errors import ApplianceError

OFFER = ("measure it at this site before clinical use: appliance model accept --profile {profile} "
         "(about 30 minutes on 2 cores; until it is accepted its answers carry a notice)")


def register(model: Tree) -> None:
    """``accept`` under ``appliance model``."""
    acc = model.command("accept", "measure the installed model on the appliance's jobs and record the verdict",
                        cmd_accept)
    acc.add_argument("--profile", help="the profile whose file to measure (default: the active one)")
    options.limit(acc, "a quick check: the first N cases and rows of each part (never recorded as a verdict)")
    options.run_dir(acc)
    options.json_output(acc, "print the result object (figures, verdict) on stdout")
    options.model(acc, help=argparse.SUPPRESS)


def cmd_accept(args) -> int:
    from appliance.acceptance.cases import load_cases
    from appliance.acceptance.report import format_result
    from appliance.acceptance.run import run_acceptance
    from appliance.acceptance.store import file_sha256, save_result
    from appliance.runtime import load_model, model_files
    from common.locations import new_run_dir, scratch_home

    settings = settings_from(args)
    if args.profile:
        settings = settings.model_copy(update={"model": args.profile})
    if args.limit is not None and args.limit < 1:
        raise ApplianceError("--limit must be at least 1")
    if settings.model_server:
        raise ApplianceError("the model runs on the clinic host: run `appliance model accept` there")
    files = model_files(settings)
    if not files.path.is_file():
        raise ApplianceError(f"no model file for profile {settings.model} at {files.path}")
    load_cases()  # a damaged set is refused before anything loads
    identity = {"model": settings.model, "model_path": str(files.path),
                "model_sha256": file_sha256(files.path, files.sha256)}
    run_dir = Path(args.resume).resolve() if args.resume else new_run_dir("accept", Path(args.out) if args.out else None)
    model = load_model(settings)
    bar = ProgressBar()
    try:
        with scratch_home("appliance-accept-"):
            from appliance.setup.home import init_home

            init_home(progress=lambda _msg: None, with_model=False)
            result = run_acceptance(model, run_dir, identity, limit=args.limit, resume=bool(args.resume),
                                    turn_agent=lambda: _turn_agent(model, settings), record=False,
                                    progress=lambda label, done, total: bar.show(label[:24], done, total))
    finally:
        bar.close()
    if result["complete"]:  # recorded in the real data home, now that the scratch one is gone
        save_result({k: v for k, v in result.items() if k != "recorded"})
        result["recorded"] = True
    print(json.dumps(result, indent=2) if args.json else format_result(result))
    return 0 if result["verdict"]["accepted"] else 1


@contextmanager
def _turn_agent(model, settings):
    """The agent as ``ask`` builds it, over the scratch home's servers, writes denied."""
    from appliance.agent.graph import Agent
    from appliance.tools.mcp_client import MCPToolBox
    from common.locations import data_home

    with MCPToolBox(env={"APPLIANCE_HOME": str(data_home())}) as tools:
        yield Agent(model, tools, settings)


def offer(profile: str, *, as_json: bool) -> None:
    """After ``model install``: run the acceptance now (asked on a terminal), else say how."""
    if as_json or not (sys.stdin.isatty() and sys.stdout.isatty()):
        if not as_json:
            print(OFFER.format(profile=profile))
        return
    answer = input(f"Run the site acceptance run for {profile} now (about 30 minutes on 2 cores)? [y/N] ")
    if answer.strip().lower() in ("y", "yes"):
        cmd_accept(argparse.Namespace(profile=profile, limit=None, resume=None, out=None, json=False, model=None))
    else:
        print(OFFER.format(profile=profile))
