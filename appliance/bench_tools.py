"""``appliance bench tools``: tool latency over the stdio transport, as the agent sees it.

Invariants:
- Runs in private data homes (writes never touch the clinic's record) and prints p50/p95 per
  tool; it asserts nothing.
- The 100k-concept UMLS database is built by the same importer code path as a licensed import
  (``umls_import.build_synthetic`` writes RRF rows and imports them), and searched over stdio.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

TOOL_CALLS = {
    "search_patient": {"name": "Maria Garcia"},
    "get_patient_chart": {"patient_id": "abc-123"},
    "check_drug_safety": {"drug_name": "warfarin"},
    "check_drug_interactions": {"drug_names": ["warfarin", "aspirin", "ibuprofen"]},
    "search_medical_literature": {"query": "atrial fibrillation anticoagulation"},
    "find_clinical_trials": {"condition": "mesothelioma", "status": None},
    "prescribe_medication": {"patient_id": "abc-123", "medication_name": "lisinopril", "dosage": "10 mg",
                             "frequency": "once daily", "notes": None},
    "add_allergy": {"patient_id": "abc-123", "substance": "latex", "reaction": "contact rash", "severity": "mild"},
    "save_clinical_note": {"patient_id": "abc-123", "note_type": "progress", "note_text": "Stable; continue plan."},
}


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered) * 1000, 2), "p95_ms": round(p95 * 1000, 2)}


def _timed(box, server: str, tool: str, args: dict, n: int) -> list[float]:
    box.call_server(server, tool, args, 30)  # warm: server start and first open are not the tool's latency
    times = []
    for _ in range(n):
        started = time.perf_counter()
        outcome = box.call_server(server, tool, args, 30)
        times.append(time.perf_counter() - started)
        if not outcome.ok:
            raise RuntimeError(f"{tool} failed during the benchmark: {outcome.error_type}")
    return times


def _umls_queries(box, rng: random.Random, n: int) -> dict[str, list[dict]]:
    names = []
    while len(names) < n:
        cui = f"C9{rng.randrange(100_000):06d}"
        outcome = box.call_server("umls", "get_concept", {"cui": cui}, 30)
        if outcome.ok and outcome.result.get("name"):
            names.append(outcome.result["name"])

    def typo(name: str) -> str:
        i = rng.randrange(1, max(2, len(name) - 1))
        return name[:i] + name[i + 1:]

    return {
        "exact": [{"term": s} for s in names],
        "prefix": [{"term": s.split()[0][:5]} for s in names],
        "typo": [{"term": typo(s)} for s in names],
    }


def run_tool_bench(n: int = 50, concepts: int = 100_000, as_json: bool = False) -> int:
    from appliance.init import init_home
    from appliance.tools.mcp_client import MCPToolBox
    from mcp_servers.umls_import import build_synthetic

    report: dict = {"tools": {}, "concept_search_100k": {}}
    with tempfile.TemporaryDirectory(prefix="appliance-bench-tools-") as home:
        os.environ["APPLIANCE_HOME"] = home
        init_home(progress=lambda _m: None, with_model=False)
        with MCPToolBox(env={"APPLIANCE_HOME": home}) as box:
            for tool, args in TOOL_CALLS.items():
                server = "ehr" if tool in ("search_patient", "get_patient_chart", "prescribe_medication",
                                           "add_allergy", "save_clinical_note") else "knowledge"
                report["tools"][tool] = percentiles(_timed(box, server, tool, args, n))
            report["tools"]["concept_search (starter subset)"] = percentiles(
                _timed(box, "umls", "concept_search", {"term": "hypertension", "max_results": 5}, n))

    with tempfile.TemporaryDirectory(prefix="appliance-bench-umls-") as big:
        db = Path(big) / "umls.sqlite"
        started = time.perf_counter()
        build_synthetic(db, concepts)
        report["concept_search_100k"]["build_seconds"] = round(time.perf_counter() - started, 1)
        report["concept_search_100k"]["db_mib"] = round(db.stat().st_size / 2**20, 1)
        with MCPToolBox(env={"APPLIANCE_HOME": big}) as box:
            queries = _umls_queries(box, random.Random(11), n)
            for kind, args_list in queries.items():
                times = []
                for args in args_list:
                    started = time.perf_counter()
                    box.call_server("umls", "concept_search", {**args, "max_results": 5}, 30)
                    times.append(time.perf_counter() - started)
                report["concept_search_100k"][kind] = percentiles(times)

    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'tool (stdio, warm)':36} {'n':>4} {'p50 ms':>8} {'p95 ms':>8}")
    for tool, p in report["tools"].items():
        print(f"{tool:36} {p['n']:4d} {p['p50_ms']:8.2f} {p['p95_ms']:8.2f}")
    big = report["concept_search_100k"]
    print(f"\nconcept_search on {concepts:,} synthetic concepts (built through the RRF importer in "
          f"{big['build_seconds']} s, {big['db_mib']} MiB):")
    for kind in ("exact", "prefix", "typo"):
        p = big[kind]
        print(f"  {kind:8} n={p['n']:3d}  p50 {p['p50_ms']:.2f} ms  p95 {p['p95_ms']:.2f} ms")
    return 0
