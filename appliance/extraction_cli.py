"""`appliance extract PROTOCOL` and `appliance eval extraction` (appliance.extraction).

Invariants:
- The protocol file is read and checked before the model is loaded: bad input ends in one
  line on stderr and exit 2 (``appliance.cli``), with nothing on stdout and nothing written.
- Output goes to stdout only at the end; the progress bar goes to stderr, and only when
  stderr is a terminal.
- ``--script FILE`` replaces the model with the scripted one (JSON keyed by the extraction
  nodes' names), as ``ask --script`` does for the agent.
"""

from __future__ import annotations

import json
from pathlib import Path

from appliance.cli_support import ProgressBar, model_from
from appliance.errors import ApplianceError

STAGE_NAMES = {"pages": "pages", "criteria": "passages"}


def _model(args):
    from appliance.extraction.grounding import grounding_nodes
    from appliance.extraction.stages import DETAILS_NODE, PAGE_NODE, PARAGRAPH_NODE, SPLIT_NODE

    return model_from(args, {PAGE_NODE, PARAGRAPH_NODE, SPLIT_NODE, DETAILS_NODE} | grounding_nodes())


def _config(args):
    from appliance.extraction import ExtractionConfig

    return ExtractionConfig(split=not args.no_split, details=not args.no_details)


def cmd_extract(args) -> int:
    from appliance.extraction import extract_criteria, load_documents

    documents = load_documents(args.protocol)  # refuses bad input before the model loads
    if args.ground:
        from appliance.extraction.grounding import check_grounding_available

        check_grounding_available()
    model = _model(args)
    bar = ProgressBar()
    try:
        result = extract_criteria(documents, model, _config(args), progress=lambda p: bar.show(
            STAGE_NAMES[p.stage], p.done, p.total, f"criteria {p.criteria}"))
        if args.ground:
            from appliance.extraction.grounding import ground_criteria

            ground_criteria(result, model, progress=lambda done, total: bar.show("grounding", done, total))
    finally:
        bar.close()
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return 0
    print(format_result(result))
    return 0


def format_result(result) -> str:
    lines: list[str] = []
    for doc in result.documents:
        title = f" - {doc['title']}" if doc.get("title") else ""
        pages = ", ".join(str(n) for n in doc["pages_with_criteria"]) or "none"
        lines.append(f"{doc['name']}{title}: {doc['criteria']} criteria (pages with criteria: {pages})")
        for c in (c for c in result.criteria if c.document == doc["name"]):
            facts = [x for x in (c.category, c.assertion) if x]
            facts += [f"{t.comparator} {t.to_json()['value']}{' ' + t.unit if t.unit else ''}" for t in c.thresholds]
            if c.temporal:
                facts.append(c.temporal)
            if c.grounding is not None:
                facts += [f"{e.get('text', '?')} -> {e.get('cui') or 'ungrounded'}"
                          for e in c.grounding.get("entities", []) if isinstance(e, dict)]
            detail = f"  ({'; '.join(facts)})" if facts else ""
            lines.append(f"  [{c.type or '?'}] {c.text}{detail}")
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def cmd_eval_extraction(args) -> int:
    from appliance.extraction.evaluate import DEFAULT_DATA, format_table, run_eval, summary_json, write_run

    data = Path(args.data) if args.data else DEFAULT_DATA
    if not (data / "trial_criteria_cache.json").is_file():
        raise ApplianceError(f"no trial_criteria_cache.json in {data}")
    model = _model(args)
    bar = ProgressBar()
    try:
        report = run_eval(model, data_dir=data, limit=args.limit, config=_config(args),
                          progress=bar.show)
    finally:
        bar.close()
    if args.out:
        write_run(report, Path(args.out))
    print(json.dumps(summary_json(report), indent=2, ensure_ascii=False) if args.json else format_table(report))
    return 0


def _common(p) -> None:
    p.add_argument("--model", help="model profile (default: gemma3-270m)")
    p.add_argument("--script", help="JSON file of scripted outputs keyed by extraction node (instead of the model)")
    p.add_argument("--no-split", action="store_true", help="keep each bullet whole (no model call to split it)")
    p.add_argument("--no-details", action="store_true",
                   help="no description call per criterion (text, side, and the thresholds code finds)")
    p.add_argument("--json", action="store_true")


def register(sub, eval_sub) -> None:
    """Add `extract` to the top-level commands and `extraction` to `appliance eval`."""
    ex = sub.add_parser("extract", help="extract eligibility criteria from a protocol (.txt, .md, .pdf, CT.gov .json)")
    ex.add_argument("protocol", help="the protocol file")
    ex.add_argument("--ground", action="store_true", help="ground each criterion's entities in the UMLS subset")
    _common(ex)
    ex.set_defaults(func=cmd_extract)

    ev = eval_sub.add_parser("extraction", help="bullets recovered, invented and mislabelled on the CT.gov sample")
    ev.add_argument("--data", help="folder holding trial_criteria_cache.json (default: ../shared/data/ctgov-sample)")
    ev.add_argument("--limit", type=int, help="only the first N records")
    ev.add_argument("--out", help="write the run (config.json, rows.jsonl) to this folder")
    _common(ev)
    ev.set_defaults(func=cmd_eval_extraction)
