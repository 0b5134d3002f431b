"""`appliance ground TEXT` and `appliance eval grounding` (appliance.grounding, seed 000).

Invariants:
- Arguments are checked before the model loads; failures are ``ApplianceError``s, which
  ``appliance.cli`` prints as one line on stderr with exit 2.
- Results go to stdout only at the end; the progress bar goes to stderr, and only when stderr
  is a terminal.
- ``--script FILE`` replaces the model with the scripted one (JSON keyed by
  ``GROUNDING_EXTRACT`` / ``GROUNDING_EVALUATE``), as ``ask --script`` does for the agent.
- Searches run in process on the data home's UMLS database by default; ``--via-mcp`` sends
  them to the UMLS server through the agent's MCP client instead.
- The grounding package is imported only when one of these commands runs, so the rest of the
  command line starts without it.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

from appliance.cli import options
from appliance.cli.options import EVAL_HELP, Tree
from appliance.cli.support import ProgressBar, model_from
from appliance.errors import ApplianceError
from common.locations import new_run_dir


def _model(args):
    from appliance.grounding.loop import NODE_EVALUATE, NODE_EXTRACT

    return model_from(args, (NODE_EXTRACT, NODE_EVALUATE))


def _search(args, stack: ExitStack):
    if getattr(args, "via_mcp", False):
        from appliance.grounding.search import MCPSearch
        from appliance.tools.mcp_client import MCPToolBox

        return MCPSearch(stack.enter_context(MCPToolBox()))
    from appliance.grounding.search import InProcessSearch
    from common.locations import umls_db_path

    return stack.enter_context(InProcessSearch(umls_db_path()))


def format_entities(result: dict) -> str:
    lines = []
    for e in result["entities"]:
        where = f"[{e['span'][0]}, {e['span'][1]})"
        head = f"{e['text']} {where} {e['type']}: {e['method']} {e['confidence']:.2f} ({e['band']})"
        if e["cui"]:
            snomed = f", SNOMED CT {e['snomed_code']}" if e["snomed_code"] else ""
            kind = f", {e['semantic_type']}" if e["semantic_type"] else ""
            lines.append(f"{head}  {e['cui']}{snomed}  {e['preferred_name']}{kind}")
        else:
            lines.append(f"{head}  needs review: {e['review_reason']}")
    s = result["stats"]
    m = s["methods"]
    lines.append(f"{s['entities']} entities: {m['exact']} exact, {m['model_selected']} model_selected, "
                 f"{m['expert_review']} expert_review; {s['model_calls']} model calls "
                 f"({s['evaluate_calls_saved']} evaluations saved by exact matches), {s['search_calls']} searches, "
                 f"{s['dropped_entities']} dropped (not in the text), {s['rejected_codes']} rejected codes; "
                 f"{s['seconds']:.1f} s")
    return "\n".join(lines)


def cmd_ground(args) -> int:
    from appliance.grounding.loop import MAX_TEXT_CHARS, ground

    if not args.text.strip():
        raise ApplianceError("nothing to ground: the text is empty")
    if len(args.text) > MAX_TEXT_CHARS:
        raise ApplianceError(f"the text is longer than {MAX_TEXT_CHARS} characters; ground it in parts")
    model = _model(args)
    with ExitStack() as stack:
        result = ground(args.text, model, _search(args, stack)).to_json()
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else format_entities(result))
    return 0


def cmd_eval_grounding(args) -> int:
    from appliance.grounding.evaluation import (
        DEFAULT_DATA,
        distinct_criteria,
        format_metrics,
        metrics_from_run,
        run_grounding_eval,
    )

    if args.recompute:
        run_dir = Path(args.recompute)
        if not (run_dir / "rows.jsonl").is_file() or not (run_dir / "config.json").is_file():
            raise ApplianceError(f"{run_dir} is not a grounding run directory (config.json, rows.jsonl)")
        metrics = metrics_from_run(run_dir)
    else:
        if args.limit is not None and args.limit < 1:
            raise ApplianceError("--limit must be at least 1")
        data = Path(args.data) if args.data else DEFAULT_DATA
        distinct_criteria(data)  # refuses a missing or malformed file before the model loads
        if args.exact_phrases:
            from appliance.grounding.evaluation import run_exact_phrase_baseline
            from common.locations import umls_db_path

            metrics = run_exact_phrase_baseline(umls_db_path(), new_run_dir("grounding", Path(args.out) if args.out else None),
                                                data=data, limit=args.limit)
        else:
            model = _model(args)
            bar = ProgressBar()
            with ExitStack() as stack:
                search = _search(args, stack)
                run_dir = new_run_dir("grounding", Path(args.out) if args.out else None)
                try:
                    metrics = run_grounding_eval(
                        model, search, run_dir, data=data, limit=args.limit,
                        progress=lambda done, total, seconds: bar.show(
                            "grounding", done, total, f"{seconds / done:.1f} s per criterion"))
                finally:
                    bar.close()
    print(json.dumps(metrics, indent=2) if args.json else format_metrics(metrics))
    return 0


def _common(p) -> None:
    options.model(p)
    options.script(p, "JSON file of scripted outputs keyed by grounding node (instead of the model)")
    p.add_argument("--via-mcp", action="store_true", help="search through the UMLS MCP server, not in process")
    options.json_output(p)


def register(tree: Tree) -> None:
    """``appliance ground`` and ``appliance eval grounding``."""
    gr = tree.command("ground", "ground clinical or criterion text to UMLS concepts (CUI + SNOMED CT)", cmd_ground)
    gr.add_argument("text", help="the criterion or clinical text")
    _common(gr)

    ev = tree.group("eval", EVAL_HELP, dest="what").command(
        "grounding", "grounding figures on TrialGPT's distinct criterion texts", cmd_eval_grounding)
    options.data_file(ev, "criterion_annotations_dev.json (default: ../shared/data/trialgpt/)")
    options.limit(ev, "only the first N distinct criteria")
    options.run_dir(ev, resume=False, recompute=True)
    ev.add_argument("--exact-phrases", action="store_true",
                    help="no model: count the criteria's exact concept phrases (the fast path's reach)")
    _common(ev)
