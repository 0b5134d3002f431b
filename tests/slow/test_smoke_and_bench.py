"""The headless commands end to end: smoke on the real model and servers, and the bench's
report shape (figures are printed, never asserted: targets live in the bench, not in tests)."""

from __future__ import annotations

import json

import pytest

from tests.slow.cli_run import run


@pytest.mark.heavy
@pytest.mark.timeout(960)
def test_smoke_passes_on_the_real_model(tmp_path):
    proc = run(["smoke", "--json"], tmp_path, 900)
    report = json.loads(proc.stdout)
    failures = [r for r in report["rows"] if not r["ok"]]
    assert proc.returncode == 0, failures
    assert report["failed"] == 0 and report["passed"] == len(report["rows"]) >= 10
    ask_user = next(r for r in report["rows"] if r["scenario"].startswith("3 matches"))
    assert ask_user["path"][-1] == "SYNTHESIZE" and "ERROR_HANDLER" not in ask_user["path"]


@pytest.mark.heavy
@pytest.mark.timeout(1560)
def test_bench_reports_every_figure_and_ratio(tmp_path):
    # two rounds: the second round's model calls reuse the first's prompt prefix (cache hits)
    proc = run(["bench", "--json", "--rounds", "2", "--repeats", "1", "--criteria", "8"], tmp_path, 1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert set(report["paths_median_turn_s"]) == {"DIRECT", "SINGLE_TOOL", "MULTI_TOOL", "KNOWLEDGE"}
    # code routes and answers the tool and knowledge turns: the model is called for the direct answer only
    assert {"INTENT_CLASSIFY", "SYNTHESIZE"} <= set(report["nodes"])
    assert "RESULT_CLASSIFY" not in report["nodes"]
    for key in ("constrained_vs_unconstrained", "constrained_vs_llama_grammar", "prefill_vs_dynamic",
                "outside_llama_fraction"):
        assert isinstance(report["ratios"][key], float), key
    assert report["raw"]["fast_total_s"] > 0 and report["raw"]["llama_grammar_total_s"] > 0
    assert report["snapshots"]["bytes"] <= report["snapshots"]["limit_bytes"]
    assert any(n["cache_hits"] > 0 for n in report["nodes"].values())
    criteria = report["criteria_throughput"]  # the same 8 criterion calls timed three ways
    assert criteria["criteria"] == 8 and all(v > 0 for v in criteria["criteria_per_minute"].values())
    assert report["ratios"]["criteria_throughput_vs_naive"] == criteria["best_vs_naive"] > 0


@pytest.mark.heavy
@pytest.mark.timeout(660)
def test_tool_bench_reports_p50_and_p95_for_every_tool(tmp_path):
    proc = run(["bench", "tools", "--json", "--calls", "3", "--concepts", "2000", "--trials", "2000"], tmp_path, 600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    from mcp_servers.contracts import TOOL_SERVERS

    served = {f"{s}.{t}" for t, s in TOOL_SERVERS.items() if s != "local"}
    assert served <= set(report["tools"])
    for name, figures in report["tools"].items():  # the demo data answers every benchmarked call
        assert (figures["ok"], figures["failed"]) == (3, 0), (name, figures)
        assert 0 < figures["p50_ms"] <= figures["p95_ms"]
    trials = report["trial_search"]
    assert trials["trials"] == 2000 and trials["build"]["inserted"] == 2000 and "synthetic" in trials["data"]
    assert 0 < trials["searches"]["all searches"]["p50_ms"] <= trials["searches"]["all searches"]["p95_ms"]
    for kind in ("exact", "prefix", "typo"):  # a one-edit typo may find nothing: counted, never timed
        figures = report["concept_search_100k"][kind]
        assert figures["ok"] + figures["failed"] == 3 and figures["ok"] >= 1, (kind, figures)
        assert 0 < figures["p50_ms"] <= figures["p95_ms"]
