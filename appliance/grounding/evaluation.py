"""`appliance eval grounding`: the grounding loop over the distinct criterion texts of TrialGPT's
criterion-level annotations (``criterion_annotations_dev.json``), measured.

Invariants (evaluations as data):
- A run directory holds ``config.json`` (written first: model, data file, limit, grounding
  configuration), ``rows.jsonl`` (one line per criterion, written as it finishes: the text, the
  entities with their histories, the loop's statistics, or the error) and ``metrics.json``,
  which ``metrics_from_run`` computes from those two files alone; ``--recompute DIR`` does it
  again, so every reported number can be recomputed from the run directory.
- Criteria are the distinct ``criterion_text`` values in file order; ``--limit N`` takes the
  first N.
- One criterion's failure (an ``ApplianceError``) is recorded in its row and the run goes on.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from appliance.errors import ApplianceError
from appliance.grounding.config import GroundingConfig
from appliance.grounding.errors import GroundingError
from appliance.grounding.loop import ground
from appliance.grounding.search import ConceptSearch
from appliance.llm.base import LanguageModel
from common.json_files import read_json
from common.locations import PROJECT_ROOT
from mcp_servers.umls.grounding import BANDS, METHODS

DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data" / "trialgpt" / "criterion_annotations_dev.json"


def distinct_criteria(path: Path) -> list[dict]:
    """The distinct criterion texts of the annotation file, in file order, with where each
    first appears."""
    rows = read_json(path, GroundingError)
    if not isinstance(rows, list):
        raise GroundingError(f"{path}: expected a list of annotation rows")
    out: list[dict] = []
    seen: set[str] = set()
    for row in rows:
        text = row.get("criterion_text") if isinstance(row, dict) else None
        if isinstance(text, str) and text.strip() and text not in seen:
            seen.add(text)
            out.append({"annotation_id": row.get("annotation_id"), "trial_id": row.get("trial_id"),
                        "criterion_type": row.get("criterion_type"), "text": text})
    return out


def run_grounding_eval(model: LanguageModel, search: ConceptSearch, run_dir: Path, *, data: Path = DEFAULT_DATA,
                       limit: int | None = None, config: GroundingConfig | None = None,
                       progress: Callable[[int, int, float], None] | None = None) -> dict:
    """Ground each distinct criterion, one JSON line each, then the metrics (``metrics.json``)."""
    config = config or GroundingConfig()
    criteria = distinct_criteria(data)
    chosen = criteria[:limit] if limit is not None else criteria
    (run_dir / "config.json").write_text(json.dumps({
        "evaluation": "grounding", "data": str(data), "distinct_criteria": len(criteria), "limit": limit,
        "criteria": len(chosen), "model": getattr(model, "profile_name", "unknown"),
        "grounding": config.to_json(), "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }, indent=2) + "\n", encoding="utf-8")
    started = time.perf_counter()
    with (run_dir / "rows.jsonl").open("w", encoding="utf-8") as out:
        for i, criterion in enumerate(chosen):
            t0 = time.perf_counter()
            row = {"row": i, **criterion}
            try:
                result = ground(criterion["text"], model, search, config)
                row.update(result.to_json(), error=None)
            except ApplianceError as exc:
                row.update(entities=[], stats=None, error=f"{type(exc).__name__}: {exc}")
            row["seconds"] = round(time.perf_counter() - t0, 3)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            if progress:
                progress(i + 1, len(chosen), time.perf_counter() - started)
    metrics = metrics_from_run(run_dir)
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return metrics


def run_exact_phrase_baseline(db_path: Path, run_dir: Path, *, data: Path = DEFAULT_DATA,
                              limit: int | None = None) -> dict:
    """No model: each criterion's exact concept phrases (``umls.grounding.exact_phrases``), the
    entities the exact fast path would take if an extractor named them. Measures how many
    evaluate calls the fast path can save on these criteria whatever model extracts."""
    from mcp_servers.umls.foundation import connect
    from mcp_servers.umls.grounding import exact_phrases
    from mcp_servers.umls.store import ensure_database

    criteria = distinct_criteria(data)
    chosen = criteria[:limit] if limit is not None else criteria
    (run_dir / "config.json").write_text(json.dumps({
        "evaluation": "grounding-exact-phrases", "data": str(data), "distinct_criteria": len(criteria),
        "limit": limit, "criteria": len(chosen), "model": None, "umls_db": str(db_path),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }, indent=2) + "\n", encoding="utf-8")
    if not Path(db_path).exists():
        ensure_database(Path(db_path))
    db = connect(db_path, read_only=True)
    try:
        with (run_dir / "rows.jsonl").open("w", encoding="utf-8") as out:
            for i, criterion in enumerate(chosen):
                t0 = time.perf_counter()
                phrases = exact_phrases(db, criterion["text"])
                out.write(json.dumps({"row": i, **criterion, "phrases": phrases,
                                      "seconds": round(time.perf_counter() - t0, 4)}, ensure_ascii=False) + "\n")
    finally:
        db.close()
    metrics = metrics_from_run(run_dir)
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return metrics


def _phrase_metrics(run_dir: Path, config: dict, rows: list[dict]) -> dict:
    n = len(rows)
    phrases = [p for r in rows for p in r["phrases"]]
    single = sum(len(p["concepts"]) == 1 for p in phrases)
    return {
        "run_dir": str(run_dir), "evaluation": "grounding-exact-phrases", "criteria": n,
        "phrases": len(phrases), "phrases_per_criterion": round(len(phrases) / n, 3) if n else 0.0,
        "criteria_with_a_phrase": sum(1 for r in rows if r["phrases"]),
        "ambiguous_phrases": len(phrases) - single,
        "evaluate_calls_saved_if_extracted": single,
        "evaluate_calls_saved_per_criterion": round(single / n, 3) if n else 0.0,
        "distinct_cuis": len({p["concepts"][0]["cui"] for p in phrases if len(p["concepts"]) == 1}),
        "seconds_total": round(sum(r["seconds"] for r in rows), 3),
        "distinct_criteria_in_data": config.get("distinct_criteria"),
    }


def _mean(values: list[float]) -> float:
    return round(statistics.fmean(values), 3) if values else 0.0


def metrics_from_run(run_dir: Path) -> dict:
    """The run's figures, from ``config.json`` and ``rows.jsonl`` only."""
    config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in (run_dir / "rows.jsonl").read_text(encoding="utf-8").splitlines() if line]
    if config.get("evaluation") == "grounding-exact-phrases":
        return _phrase_metrics(run_dir, config, rows)
    n = len(rows)
    stats = [r["stats"] for r in rows if r.get("stats")]
    entities = [e for r in rows for e in r.get("entities", [])]
    total = len(entities)

    def total_of(key: str) -> int:
        return int(sum(s.get(key, 0) for s in stats))

    methods = {m: sum(e["method"] == m for e in entities) for m in METHODS}
    reasons: dict[str, int] = {}
    for e in entities:
        if e.get("review_reason"):
            reasons[e["review_reason"]] = reasons.get(e["review_reason"], 0) + 1
    calls = total_of("model_calls")
    saved = total_of("evaluate_calls_saved")
    seconds = [r["seconds"] for r in rows]
    per_criterion = _mean(seconds)
    return {
        "run_dir": str(run_dir), "model": config.get("model"), "criteria": n,
        "criteria_with_errors": sum(1 for r in rows if r.get("error")),
        "extraction_failures": sum(1 for s in stats if s.get("extraction_failed")),
        "entities": total, "entities_per_criterion": round(total / n, 3) if n else 0.0,
        "methods": methods,
        "method_share": {m: round(c / total, 3) if total else 0.0 for m, c in methods.items()},
        "bands": {b: sum(e.get("band") == b for e in entities) for b in BANDS},
        "review_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "rejected_codes": total_of("rejected_codes"),
        "dropped_entities": total_of("dropped_entities"), "duplicate_entities": total_of("duplicate_entities"),
        "parse_failures": total_of("parse_failures"), "search_failures": total_of("search_failures"),
        "model_calls": calls, "model_calls_per_criterion": round(calls / n, 3) if n else 0.0,
        "evaluate_calls": total_of("evaluate_calls"),
        "evaluate_calls_saved_by_exact": saved,
        "model_call_share_saved_by_exact": round(saved / (calls + saved), 3) if calls + saved else 0.0,
        "search_calls_per_criterion": round(total_of("search_calls") / n, 3) if n else 0.0,
        "seconds_per_criterion": {"mean": per_criterion, "median": round(statistics.median(seconds), 3) if seconds else 0.0,
                                  "max": max(seconds, default=0.0)},
        "seconds_total": round(sum(seconds), 3),
        "distinct_criteria_in_data": config.get("distinct_criteria"),
        "extrapolated_seconds_all_distinct": round(per_criterion * (config.get("distinct_criteria") or 0), 1),
    }


def format_metrics(m: dict) -> str:
    if m.get("evaluation") == "grounding-exact-phrases":
        return "\n".join([
            f"exact concept phrases in {m['criteria']} criteria (no model); run: {m['run_dir']}",
            f"  phrases: {m['phrases']} ({m['phrases_per_criterion']} per criterion) in "
            f"{m['criteria_with_a_phrase']} criteria; ambiguous: {m['ambiguous_phrases']}; distinct CUIs: "
            f"{m['distinct_cuis']}",
            f"  evaluate calls the exact fast path saves if these are extracted: "
            f"{m['evaluate_calls_saved_if_extracted']} ({m['evaluate_calls_saved_per_criterion']} per criterion)",
        ])
    share = m["method_share"]
    return "\n".join([
        f"grounding on {m['criteria']} criteria ({m['model']}); run: {m['run_dir']}",
        f"  entities: {m['entities']} ({m['entities_per_criterion']} per criterion); dropped (not in the text): "
        f"{m['dropped_entities']}, duplicates: {m['duplicate_entities']}",
        f"  methods: exact {share['exact']:.1%}, model_selected {share['model_selected']:.1%}, "
        f"expert_review {share['expert_review']:.1%}",
        f"  review reasons: {', '.join(f'{k} {v}' for k, v in m['review_reasons'].items()) or 'none'}",
        f"  rejected codes: {m['rejected_codes']}; parse failures: {m['parse_failures']} "
        f"(extractions failed: {m['extraction_failures']}); criteria with errors: {m['criteria_with_errors']}",
        f"  model calls: {m['model_calls_per_criterion']} per criterion ({m['model_calls']} in all); "
        f"saved by exact matches: {m['evaluate_calls_saved_by_exact']} "
        f"({m['model_call_share_saved_by_exact']:.1%} of the calls without the fast path)",
        f"  seconds per criterion: mean {m['seconds_per_criterion']['mean']}, median "
        f"{m['seconds_per_criterion']['median']}, max {m['seconds_per_criterion']['max']}; "
        f"all {m['distinct_criteria_in_data']} distinct criteria: about {m['extrapolated_seconds_all_distinct']:.0f} s",
    ])
