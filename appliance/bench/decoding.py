"""``appliance bench``: decoding and turn figures, measured side by side in one process.

Invariants:
- Every model call is made for real and timed. To make paths repeatable, the branching
  decisions (intent, tool, arguments, result label) may be overridden *after* the real call
  returns; the time is the real call's.
- The comparison runs the same captured node calls through the fast decoder, llama-cpp-python's
  grammar path and unconstrained decoding of the same output length, each starting from the
  state a node call has inside a turn (the node's static prefix in the KV cache, nothing
  else), so prefill is equal and only decoding differs.
- Criteria throughput (``criteria_throughput``) times the same TrialGPT criterion calls three
  ways in one process: naive (KV cache cleared before every call), prefix reuse, and batches.
- It prints figures and ratios; it asserts nothing (targets live in the issue and the README).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict, deque
from dataclasses import dataclass

from appliance.config import Settings
from appliance.errors import ApplianceError, GenerationTruncated
from common.locations import scratch_home


@dataclass
class Recorded:
    node: str
    schema: str | None
    seconds: float
    prompt_tokens: int
    prefill_tokens: int
    static_tokens: int
    completion_tokens: int
    eval_seconds: float
    cache_hit: bool
    call: tuple | None  # (messages, schema class, temperature, max_tokens) for constrained calls


class RecordingModel:
    """Wraps the real model: records every call's stats, then applies queued overrides."""

    def __init__(self, real, overrides: dict[str, list[dict]] | None = None):
        self.real = real
        self.profile_name = real.profile_name
        self.last_stats = None
        self.calls: list[Recorded] = []
        self.overrides = {node: deque(items) for node, items in (overrides or {}).items()}

    def _record(self, node, schema, call) -> None:
        s = self.real.last_stats
        self.last_stats = s
        self.calls.append(Recorded(node, schema.__name__ if schema else None, s.seconds, s.prompt_tokens,
                                   s.prefill_tokens, s.static_tokens, s.completion_tokens, s.eval_seconds,
                                   s.cache_hit, call))

    def generate_constrained(self, node, messages, schema, *, temperature, max_tokens):
        out = self.real.generate_constrained(node, messages, schema, temperature=temperature, max_tokens=max_tokens)
        self._record(node, schema, (list(messages), schema, temperature, max_tokens))
        queue = self.overrides.get(node)
        if queue:
            out = schema.model_validate(queue.popleft())
        return out

    def generate_free(self, node, messages, **kw):
        text = self.real.generate_free(node, messages, **kw)
        self._record(node, None, None)
        return text


def _path_overrides(path: str) -> tuple[str, dict]:
    intent = {"intent": "TOOL_NEEDED", "task_summary": "Clinician lookup.", "suggested_tool": "check_drug_safety"}
    good = {"quality": "success_rich", "brief_summary": "Useful data returned."}
    if path == "DIRECT":
        return "What is hypertension?", {
            "INTENT_CLASSIFY": [{"intent": "DIRECT", "task_summary": "Definition of hypertension.", "suggested_tool": None}]}
    if path == "SINGLE_TOOL":
        return "Check FDA warnings for dofetilide", {
            "INTENT_CLASSIFY": [intent],
            "TOOL_SELECT": [{"tool_name": "check_drug_safety"}, {"drug_name": "dofetilide"}],
            "RESULT_CLASSIFY": [good]}
    return "Check FDA warnings for warfarin and find studies on warfarin", {
        "INTENT_CLASSIFY": [intent],
        "TOOL_SELECT": [{"tool_name": "check_drug_safety"}, {"drug_name": "warfarin"},
                        {"tool_name": "search_medical_literature"}, {"query": "warfarin bleeding"}],
        "RESULT_CLASSIFY": [good, good]}


def _median(values) -> float:
    values = list(values)
    return round(statistics.median(values), 4) if values else 0.0


# Knowledge questions as clinicians write them, run with no overrides: the route is whatever
# the agent decides (code or model), so their model calls and turn times are the agent's own.
KNOWLEDGE_QUESTIONS = ("Check FDA warnings for dofetilide", "does warfarin interact with ibuprofen?",
                       "what is metformin used for?", "any trials for lung cancer")
PATHS = ("DIRECT", "SINGLE_TOOL", "MULTI_TOOL", "KNOWLEDGE")


def _turn_plan(round_: int) -> list[tuple[str, str, dict]]:
    """(path, query, overrides) for one round: the three scripted paths, then one knowledge
    question (a different one each round, in turn)."""
    plan = [(path, *_path_overrides(path)) for path in PATHS[:3]]
    return plan + [("KNOWLEDGE", KNOWLEDGE_QUESTIONS[round_ % len(KNOWLEDGE_QUESTIONS)], {})]


def run_turns(model, tools, settings: Settings, rounds: int):
    from appliance.agent.graph import Agent
    from appliance.tools.base import deny_all

    turns = []
    drugs = None
    for r in range(rounds):
        for path, query, overrides in _turn_plan(r):
            rec = RecordingModel(model, overrides)
            agent = Agent(rec, tools, settings, deny_all, drugs=drugs)
            drugs = agent.drugs
            started = time.perf_counter()
            result = agent.run_turn(query)
            wall = time.perf_counter() - started
            answer = next((e.output for e in result.trace if e.node == "SYNTHESIZE"), {})
            turns.append({"round": r, "path": path, "query": query, "wall": wall, "nodes": result.path,
                          "calls": rec.calls, "model_calls": len(rec.calls),
                          "withheld": bool(answer.get("withheld")), "fallback": bool(answer.get("fallback_used"))})
    return turns


def compare_decoders(model, calls: list[Recorded], repeats: int) -> list[dict]:
    from appliance.llm.prompt import split_parts

    rows = []
    for rec in calls:
        messages, schema, temperature, max_tokens = rec.call
        grammar_failures = 0
        static, _ = split_parts(messages)
        times = defaultdict(list)
        tokens = 0
        for _ in range(repeats):
            model.cache.start_from_static(static)
            t = time.perf_counter()
            model.generate_constrained(rec.node, messages, schema, temperature=temperature, max_tokens=max_tokens, decoder="fast")
            times["fast"].append(time.perf_counter() - t)
            tokens = model.last_stats.completion_tokens
            model.cache.start_from_static(static)
            t = time.perf_counter()
            model.generate_free(rec.node, messages, temperature=0.0, max_tokens=tokens, ignore_eog=True)
            times["unconstrained"].append(time.perf_counter() - t)
            model.cache.start_from_static(static)
            t = time.perf_counter()
            try:  # the same output length as the fast call: a stop at that length is expected
                model.generate_constrained(rec.node, messages, schema, temperature=temperature,
                                           max_tokens=tokens, decoder="grammar")
            except GenerationTruncated:
                pass
            except ApplianceError:
                grammar_failures += 1  # reported, never hidden
            times["llama_grammar"].append(time.perf_counter() - t)
        fast, free, grammar = (_median(times[k]) for k in ("fast", "unconstrained", "llama_grammar"))
        rows.append({"node": rec.node, "schema": rec.schema, "output_tokens": tokens, "fast_s": fast,
                     "unconstrained_s": free, "llama_grammar_s": grammar,
                     "fast_vs_unconstrained": round(fast / free, 3) if free else None,
                     "fast_vs_llama_grammar": round(fast / grammar, 3) if grammar else None,
                     "llama_grammar_failures": grammar_failures})
    return rows


def summarize(turns, comparison, model, snapshots: dict) -> dict:
    later = [t for t in turns if t["round"] > 0] or turns
    per_node = defaultdict(list)
    for t in turns:
        for c in t["calls"]:
            per_node[c.node].append(c)
    nodes = {
        node: {"calls": len(cs), "median_s": _median(c.seconds for c in cs),
               "median_generated_tokens": _median(c.completion_tokens for c in cs),
               "median_prefill_tokens": _median(c.prefill_tokens for c in cs),
               "cache_hits": sum(c.cache_hit for c in cs)}
        for node, cs in per_node.items()
    }
    # warm turns only: the first round also builds the token table and the prefix snapshots
    paths = {p: _median(t["wall"] for t in later if t["path"] == p) for p in PATHS}
    calls_per_turn = {p: _median(t["model_calls"] for t in turns if t["path"] == p) for p in PATHS}
    knowledge = [{"query": t["query"], "wall_s": round(t["wall"], 3), "model_calls": t["model_calls"],
                  "nodes": t["nodes"]} for t in turns if t["path"] == "KNOWLEDGE"]
    prefill = sum(c.prefill_tokens for t in later for c in t["calls"])
    dynamic = sum(c.prompt_tokens - c.static_tokens for t in later for c in t["calls"])
    outside = [(t["wall"] - sum(c.eval_seconds for c in t["calls"])) / t["wall"] for t in later]
    fast = [r["fast_s"] for r in comparison]
    free = [r["unconstrained_s"] for r in comparison]
    grammar = [r["llama_grammar_s"] for r in comparison]
    ratios = {
        "constrained_vs_unconstrained": round(sum(fast) / sum(free), 3) if free else None,
        "constrained_vs_llama_grammar": round(sum(fast) / sum(grammar), 3) if grammar else None,
        "prefill_vs_dynamic": round(prefill / dynamic, 3) if dynamic else None,
        "outside_llama_fraction": round(statistics.median(outside), 3) if outside else None,
        "median_call_constrained_vs_unconstrained": _median(r["fast_vs_unconstrained"] for r in comparison),
        "median_call_constrained_vs_llama_grammar": _median(r["fast_vs_llama_grammar"] for r in comparison),
    }
    return {
        "model": model.profile_name,
        "nodes": nodes,
        "paths_median_turn_s": paths,
        "paths_median_model_calls_per_turn": calls_per_turn,
        "median_turn_s": _median(t["wall"] for t in later),
        "median_model_calls_per_turn": _median(t["model_calls"] for t in turns),
        "knowledge_turns": knowledge,
        "comparison": comparison,
        "raw": {"fast_total_s": round(sum(fast), 3), "unconstrained_total_s": round(sum(free), 3),
                "llama_grammar_total_s": round(sum(grammar), 3), "prefill_tokens_after_first_round": prefill,
                "dynamic_tokens_after_first_round": dynamic,
                "llama_grammar_failures": sum(r["llama_grammar_failures"] for r in comparison),
                "outside_fraction_per_turn": [round(x, 3) for x in outside]},
        "snapshots": snapshots,
        "ratios": ratios,
        # answers the fact guard withheld, and answers replaced by the findings (echo, empty, off-topic)
        "answers": {"turns": len(turns), "withheld_by_fact_guard": sum(t["withheld"] for t in turns),
                    "replaced_by_findings": sum(t["fallback"] for t in turns)},
    }


def print_table(report: dict) -> None:
    print(f"model: {report['model']}")
    print(f"\n{'node':22} {'calls':>5} {'median s':>9} {'gen tok':>8} {'prefill':>8} {'hits':>5}")
    for node, n in report["nodes"].items():
        print(f"{node:22} {n['calls']:5d} {n['median_s']:9.3f} {n['median_generated_tokens']:8.0f} "
              f"{n['median_prefill_tokens']:8.0f} {n['cache_hits']:5d}")
    a = report["answers"]
    print(f"\nanswers: {a['turns']} turns, {a['withheld_by_fact_guard']} withheld by the fact guard, "
          f"{a['replaced_by_findings']} replaced by the findings")
    print("\nmedian turn time: " + ", ".join(f"{p} {s:.2f} s" for p, s in report["paths_median_turn_s"].items())
          + f"; all turns {report['median_turn_s']:.2f} s")
    print("median model calls per turn: " + ", ".join(
        f"{p} {n:g}" for p, n in report["paths_median_model_calls_per_turn"].items())
          + f"; all turns {report['median_model_calls_per_turn']:g}")
    print(f"\n{'node / schema':40} {'tokens':>6} {'fast s':>7} {'free s':>7} {'grammar s':>9} {'f/free':>7} {'f/gram':>7}")
    for r in report["comparison"]:
        print(f"{r['node'] + ' / ' + r['schema']:40} {r['output_tokens']:6d} {r['fast_s']:7.3f} {r['unconstrained_s']:7.3f} "
              f"{r['llama_grammar_s']:9.3f} {r['fast_vs_unconstrained']:7.3f} {r['fast_vs_llama_grammar']:7.3f}")
    s = report["snapshots"]
    print(f"\nKV snapshots: {s['count']} holding {s['bytes'] / 2**20:.1f} MiB (limit {s['limit_bytes'] / 2**20:.0f} MiB)")
    c = report.get("criteria_throughput")
    if c:
        print(f"\ncriteria per minute ({c['criteria']} TrialGPT rows): "
              + ", ".join(f"{k} {v}" for k, v in c["criteria_per_minute"].items()))
    print("ratios: " + ", ".join(f"{k}={v}" for k, v in report["ratios"].items()))


CRITERIA_ROWS = 16  # TrialGPT rows for the criteria throughput figures (the first two patients' worth)


def criteria_throughput(model, rows: int = CRITERIA_ROWS, parallel: int = 8) -> dict | None:
    """Criteria per minute on the first ``rows`` TrialGPT annotation rows, three ways side by
    side: a naive loop that re-prefills every call (the KV cache cleared before each), the same
    loop reusing the patient's prefix from the call before, and batches of ``parallel`` calls
    sharing the patient's prefix cells. None when the annotation file is not on this machine."""
    from appliance.prescreen import judge, trialgpt

    if not trialgpt.DEFAULT_DATA.exists():
        return None
    chosen = trialgpt.load_rows(trialgpt.DEFAULT_DATA)[:rows]
    calls = [judge.prepare(judge.note_evidence(r.note), r.criterion_text, r.criterion_type) for r in chosen]

    def timed(run) -> float:
        model.cache.clear()
        started = time.perf_counter()
        run()
        return time.perf_counter() - started

    def naive() -> None:
        for call in calls:
            model.cache.clear()
            judge.evaluate_criteria(model, [call])

    seconds = {
        "naive": timed(naive),
        "prefix_reuse": timed(lambda: judge.evaluate_criteria(model, calls, parallel=1)),
        "prefix_reuse_batched": timed(lambda: judge.evaluate_criteria(model, calls, parallel=parallel)),
    }
    per_minute = {k: round(len(calls) / v * 60, 1) for k, v in seconds.items()}
    best = max(per_minute["prefix_reuse"], per_minute["prefix_reuse_batched"])
    return {"criteria": len(calls), "parallel": parallel, "seconds": {k: round(v, 3) for k, v in seconds.items()},
            "criteria_per_minute": per_minute,
            "prefix_reuse_vs_naive": round(per_minute["prefix_reuse"] / per_minute["naive"], 3),
            "batched_vs_naive": round(per_minute["prefix_reuse_batched"] / per_minute["naive"], 3),
            "best_vs_naive": round(best / per_minute["naive"], 3)}


def run_bench(settings: Settings, as_json: bool = False, rounds: int = 3, repeats: int = 3,
              criteria: int = CRITERIA_ROWS) -> int:
    from appliance.runtime import load_model
    from appliance.setup.home import init_home
    from appliance.tools.mcp_client import MCPToolBox

    if criteria < 0 or criteria == 1:
        raise ApplianceError("--criteria must be 0 (skip) or at least 2")
    settings = settings.model_copy(update={"model_server": None})  # this bench measures the in-process runtime

    with scratch_home("appliance-bench-") as home_path:
        home = str(home_path)
        init_home(progress=lambda _m: None, with_model=False)
        model = load_model(settings)
        with MCPToolBox(env={"APPLIANCE_HOME": home}) as tools:
            turns = run_turns(model, tools, settings, rounds)
        snapshots = {"count": model.cache.snapshot_count, "bytes": model.cache.snapshot_bytes,
                     "limit_bytes": model.cache.max_bytes}
        first = {}
        for t in turns:
            for c in t["calls"]:
                if c.call is not None:
                    first.setdefault((c.node, c.schema), c)
        comparison = compare_decoders(model, list(first.values()), repeats)
        criteria = criteria_throughput(model, criteria) if criteria > 0 else None
    report = summarize(turns, comparison, model, snapshots)
    report["criteria_throughput"] = criteria
    report["ratios"]["criteria_throughput_vs_naive"] = criteria["best_vs_naive"] if criteria else None
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0
