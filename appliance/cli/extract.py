"""`appliance extract PROTOCOL` and `appliance eval extraction` (appliance.extraction).

Invariants:
- The protocol file is read and checked before the model is loaded: bad input ends in one
  line on stderr and exit 2 (``appliance.cli``), with nothing on stdout and nothing written.
- A protocol over ``--max-pages`` or ``--max-chars`` is refused before the model loads (exit 2)
  naming the option that raises the limit; before the work starts one line on stderr states
  it: pages, characters and the estimated model calls (``estimate_calls``).
- Output goes to stdout only at the end; the progress bar goes to stderr when stderr is a
  terminal, otherwise a progress line at every tenth of a long run (more than
  ``QUIET_WINDOWS`` page windows).
- ``--script FILE`` replaces the model with the scripted one (JSON keyed by the extraction
  nodes' names), as ``ask --script`` does for the agent.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from appliance.cli import options
from appliance.cli.options import EVAL_HELP, Tree
from appliance.cli.support import ProgressBar, model_from
from appliance.errors import ApplianceError

STAGE_NAMES = {"pages": "pages", "criteria": "passages"}
QUIET_WINDOWS = 50  # up to this many page windows, a run off a terminal prints no progress lines
MAX_PAGES = 300  # the default limits (a long protocol is 100-250 pages); --max-pages, --max-chars raise them
MAX_CHARS = 1_500_000  # about 300 dense pages


def estimate_calls(documents, config) -> int:
    """Page-filter calls at most: one per page window (``chunking``: a window holds at most
    ``page_cap`` tokens, counted as UTF-8 bytes / 3 as for a model without a tokenizer); CT.gov
    records need none. The criteria found then cost one or two calls each."""
    per_window = config.page_cap * 3
    return sum(max(1, -(-len(p.text.encode("utf-8")) // per_window))
               for d in documents if d.kind != "ctgov" for p in d.pages)


class _Progress:
    """The bar on a terminal; elsewhere (a script, a log) one line per tenth of a long run."""

    def __init__(self, bar: ProgressBar):
        self.bar = bar
        self.said: set[tuple[str, int]] = set()

    def show(self, label: str, done: int, total: int, tail: str = "") -> None:
        self.bar.show(label, done, total, tail)
        if self.bar.enabled or total <= QUIET_WINDOWS:
            return
        tenth = done * 10 // total
        if (label, tenth) not in self.said and (done * 10) % total < 10:
            self.said.add((label, tenth))
            print(f"extract: {label} {done}/{total}" + (f", {tail}" if tail else ""), file=sys.stderr, flush=True)


def _model(args):
    from appliance.extraction.grounding import grounding_nodes
    from appliance.extraction.stages import (
        DETAILS_NODE,
        PAGE_NODE,
        PARAGRAPH_NODE,
        SPLIT_NODE,
    )

    return model_from(args, {PAGE_NODE, PARAGRAPH_NODE, SPLIT_NODE, DETAILS_NODE} | grounding_nodes())


def _config(args):
    from appliance.extraction import ExtractionConfig

    return ExtractionConfig(split=not args.no_split, details=not args.no_details)


def cmd_extract(args) -> int:
    from appliance.extraction import extract_criteria, load_documents
    from appliance.extraction.loaders import check_size
    from common.user_files import regular_file

    # refuses bad or oversized input before the model loads (a PDF before its text is read)
    regular_file(args.protocol, ApplianceError)  # a FIFO or a device is refused before it is opened
    documents = load_documents(args.protocol, max_pages=args.max_pages)
    name = Path(args.protocol).name
    pages, chars = check_size(name, documents, args.max_pages, args.max_chars)
    config = _config(args)
    model = _model(args)
    per_criterion = "one or two" if config.split and config.details else "one" if config.split or config.details \
        else "no"
    print(f"extract: {name}: {pages:,} page(s), {chars:,} characters; up to {estimate_calls(documents, config):,} "
          f"model call(s) to find the criteria, then {per_criterion} per criterion found", file=sys.stderr, flush=True)
    bar = ProgressBar()
    progress = _Progress(bar)
    try:
        result = extract_criteria(documents, model, config, progress=lambda p: progress.show(
            STAGE_NAMES[p.stage], p.done, p.total, f"criteria {p.criteria}"))
        if args.ground:
            from appliance.extraction.grounding import ground_criteria

            ground_criteria(result, model, progress=lambda done, total: progress.show("grounding", done, total))
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
    from appliance.extraction.evaluation import (
        DEFAULT_DATA,
        format_table,
        run_eval,
        summary_json,
        write_run,
    )

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


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _common(p) -> None:
    options.model(p)
    options.script(p, "JSON file of scripted outputs keyed by extraction node (instead of the model)")
    p.add_argument("--no-split", action="store_true", help="keep each bullet whole (no model call to split it)")
    p.add_argument("--no-details", action="store_true",
                   help="no description call per criterion (text, side, and the thresholds code finds)")
    options.json_output(p)


def register(tree: Tree) -> None:
    """``appliance extract`` and ``appliance eval extraction``."""
    ex = tree.command("extract", "extract eligibility criteria from a protocol (.txt, .md, .pdf, CT.gov .json)",
                      cmd_extract)
    ex.add_argument("protocol", help="the protocol file")
    ex.add_argument("--ground", action="store_true", help="ground each criterion's entities in the UMLS subset")
    ex.add_argument("--max-pages", type=_positive, default=MAX_PAGES, metavar="N",
                    help=f"refuse a protocol of more pages (default {MAX_PAGES})")
    ex.add_argument("--max-chars", type=_positive, default=MAX_CHARS, metavar="N",
                    help=f"refuse a protocol of more characters (default {MAX_CHARS:,})")
    _common(ex)

    ev = tree.group("eval", EVAL_HELP, dest="what").command(
        "extraction", "bullets recovered, invented and mislabelled on the CT.gov sample", cmd_eval_extraction)
    options.data_file(ev, "folder holding trial_criteria_cache.json (default: ../shared/data/ctgov-sample)")
    options.limit(ev, "only the first N records")
    options.run_dir(ev, resume=False, out_help="write the run (config.json, rows.jsonl) to this folder")
    _common(ev)
