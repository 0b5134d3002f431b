"""``appliance bench tools``: tool latency over the stdio transport, as the agent sees it.

Invariants:
- Runs in private data homes (writes never touch the clinic's record) and prints p50/p95 per
  tool; it asserts nothing.
- Only successful calls are timed. A call that fails is counted (with its error type) and
  reported next to the figures, never folded into them: a fast failure is not a fast tool
  (``appliance.bench.timing``).
- Every tool of the three servers is measured: the agent's tools and the lookups around them
  (trial details, concept and semantic-type lookups, both drug vocabularies).
- The 100k-concept UMLS database is built by the same importer code path as a licensed import
  (``umls.importer.build_synthetic`` writes RRF rows and imports them), and searched over stdio.
- The trial search is measured on 50,000 trials (``--trials``) imported from a bulk-download
  zip (``appliance.bench.trials``); the trials are generated from the real sample records.
- ``audit verify`` is timed on a record of 100,000 clinical rows (the demo patients and
  synthetic observations loaded as one audited event with every row's digest): the chain, the
  ledger and every row's digest in one pass (``ehr_db.custody``), wall and CPU seconds.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

from appliance.bench.timing import DEADLINE, time_calls
from common.locations import scratch_home

# (server, tool, arguments), in report order.
TOOL_CALLS: tuple[tuple[str, str, dict], ...] = (
    ("ehr", "search_patient", {"name": "Maria Garcia"}),
    ("ehr", "get_patient_chart", {"patient_id": "abc-123"}),
    ("ehr", "prescribe_medication", {"patient_id": "abc-123", "medication_name": "lisinopril", "dosage": "10 mg",
                                     "frequency": "once daily", "notes": None}),
    ("ehr", "add_allergy", {"patient_id": "abc-123", "substance": "latex", "reaction": "contact rash",
                            "severity": "mild"}),
    ("ehr", "save_clinical_note", {"patient_id": "abc-123", "note_type": "progress",
                                   "note_text": "Stable; continue plan."}),
    ("ehr", "change_medication_order", {"patient_id": "abc-123", "medication_name": "metformin",
                                        "new_medication_name": None, "dosage": "500 mg",
                                        "frequency": None, "reason": "kept at the same dose"}),
    ("ehr", "update_medication_status", {"patient_id": "abc-123", "medication_name": "metformin", "action": "renew",
                                         "reason": None}),
    ("knowledge", "check_drug_safety", {"drug_name": "warfarin"}),
    ("knowledge", "check_drug_interactions", {"drug_names": ["warfarin", "aspirin", "ibuprofen"]}),
    ("knowledge", "search_medical_literature", {"query": "atrial fibrillation anticoagulation"}),
    ("knowledge", "find_clinical_trials", {"condition": "mesothelioma", "intervention": None, "eligibility_keywords": None,
                                           "status": "any", "phase": None, "sex": None, "patient_age": None,
                                           "study_type": None, "page_size": None}),
    ("knowledge", "get_trial_details", {"nct_id": "NCT-DEMO-0001"}),
    ("knowledge", "drug_vocabulary", {}),
    ("umls", "concept_search", {"term": "hypertension", "max_results": 5}),
    ("umls", "get_concept", {"cui": "C0020538"}),
    ("umls", "get_semantic_type", {"cui": "C0043031"}),
    ("umls", "drug_vocabulary", {}),
)
def bench_tool_calls(box, n: int) -> dict[str, dict]:
    """p50/p95 of every tool in ``TOOL_CALLS`` (after one warm-up call each)."""
    report = {}
    for server, tool, args in TOOL_CALLS:
        box.call_server(server, tool, args, DEADLINE)  # warm: server start and first open are not the tool's latency
        report[f"{server}.{tool}"] = time_calls(box, server, tool, [args] * n).summary()
    return report


def umls_queries(box, rng: random.Random, n: int, concepts: int = 100_000) -> tuple[dict[str, list[dict]], int]:
    """Exact, prefix and one-typo queries built from names of random synthetic concepts, and
    the number of lookups that failed while picking them (bounded: never loops forever)."""
    names, failed = [], 0
    for _ in range(max(20 * n, 100)):
        if len(names) >= n:
            break
        outcome = box.call_server("umls", "get_concept", {"cui": f"C9{rng.randrange(concepts):06d}"}, DEADLINE)
        if outcome.ok and outcome.result and outcome.result.get("name"):
            names.append(outcome.result["name"])
        else:
            failed += 1

    def typo(name: str) -> str:
        i = rng.randrange(1, max(2, len(name) - 1))
        return name[:i] + name[i + 1:]

    return {
        "exact": [{"term": s, "max_results": 5} for s in names],
        "prefix": [{"term": s.split()[0][:5], "max_results": 5} for s in names],
        "typo": [{"term": typo(s), "max_results": 5} for s in names],
    }, failed


def bench_concept_search(box, queries: dict[str, list[dict]]) -> dict[str, dict]:
    return {kind: time_calls(box, "umls", "concept_search", args_list).summary()
            for kind, args_list in queries.items()}


def bench_audit_verify(rows: int = 100_000) -> dict:
    """Seconds `audit verify` takes on a record of ``rows`` clinical rows (built in a temporary
    folder: the demo load, then synthetic observations as one audited load)."""
    from common.sqlite import opened, write_transaction
    from ehr_db import custody, heads
    from ehr_db.repository import EhrRepository
    from ehr_db.setup import ensure_database

    with tempfile.TemporaryDirectory(prefix="appliance-bench-verify-") as folder:
        path = Path(folder) / "ehr.sqlite"
        started = time.perf_counter()
        ensure_database(path)
        with opened(path) as db:
            present = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in custody.TABLES)
            with write_transaction(db):
                db["observations"].insert_all(
                    {"id": f"bench-obs-{i}", "patient_id": f"pat-{1 + i % 12:03d}", "loinc_code": "2345-7",
                     "display": "Glucose", "value_num": float(70 + i % 90), "unit": "mg/dL", "ref_low": 70.0,
                     "ref_high": 99.0, "category": "laboratory", "status": "final",
                     "effective_at": f"20{10 + i % 16}-01-01", "source": "fhir"}
                    for i in range(max(0, rows - present)))
                cursor = db.conn.execute("SELECT * FROM observations WHERE id LIKE 'bench-obs-%'")
                columns = [c[0] for c in cursor.description]
                index, digest = columns.index("id"), custody.digester("observations", columns)
                custody.append_entries(db, "bench", "bench_load", {"rows": rows}, None,
                                       [("observations", v[index], None, digest(v)) for v in cursor])
            heads.keep(db)
        built = time.perf_counter() - started
        wall, cpu = time.perf_counter(), time.process_time()
        verdict = EhrRepository(path).verify_audit()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"clinical_rows": verdict.clinical_rows, "ok": verdict.ok, "seconds": round(wall, 2),
            "cpu_seconds": round(cpu, 2), "build_seconds": round(built, 1)}


def print_audit_verify(figures: dict) -> None:
    state = "verified" if figures["ok"] else "DID NOT VERIFY"
    print(f"\naudit verify on {figures['clinical_rows']:,} clinical rows ({state}): {figures['seconds']} s "
          f"({figures['cpu_seconds']} s CPU; the record built in {figures['build_seconds']} s)")


def _ms(value) -> str:
    return f"{value:8.2f}" if value is not None else f"{'-':>8}"


def print_report(report: dict, concepts: int) -> None:
    print(f"{'tool (stdio, warm)':40} {'ok':>4} {'failed':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for tool, p in report["tools"].items():
        print(f"{tool:40} {p['ok']:4d} {p['failed']:6d} {_ms(p['p50_ms'])} {_ms(p['p95_ms'])}")
    big = report["concept_search_100k"]
    print(f"\nconcept_search on {concepts:,} synthetic concepts (built through the RRF importer in "
          f"{big['build_seconds']} s, {big['db_mib']} MiB):")
    for kind in ("exact", "prefix", "typo"):
        p = big[kind]
        print(f"  {kind:8} ok={p['ok']:3d} failed={p['failed']:3d}  p50 {_ms(p['p50_ms']).strip()} ms  "
              f"p95 {_ms(p['p95_ms']).strip()} ms")
    failures = {name: p["errors"] for name, p in [*report["tools"].items(), *big.items()]
                if isinstance(p, dict) and p.get("errors")}
    if big.get("query_lookups_failed"):
        failures["picking queries (get_concept)"] = {"failed": big["query_lookups_failed"]}
    if failures:
        print("\nFAILED CALLS (not timed):")
        for name, errors in failures.items():
            print(f"  {name}: " + ", ".join(f"{kind} x{count}" for kind, count in errors.items()))


def run_tool_bench(n: int = 50, concepts: int = 100_000, as_json: bool = False, trials: int = 50_000,
                   verify_rows: int = 100_000) -> int:
    from appliance.bench.trials import print_trial_section, run_trial_section
    from appliance.setup.home import init_home
    from appliance.tools.mcp_client import MCPToolBox
    from mcp_servers.umls.importer import build_synthetic

    report: dict = {"tools": {}, "concept_search_100k": {}}
    with scratch_home("appliance-bench-tools-") as home_path:
        home = str(home_path)
        init_home(progress=lambda _m: None, with_model=False)
        with MCPToolBox(env={"APPLIANCE_HOME": home}) as box:
            report["tools"] = bench_tool_calls(box, n)

    with tempfile.TemporaryDirectory(prefix="appliance-bench-umls-") as big:
        db = Path(big) / "umls.sqlite"
        started = time.perf_counter()
        build_synthetic(db, concepts)
        report["concept_search_100k"]["build_seconds"] = round(time.perf_counter() - started, 1)
        report["concept_search_100k"]["db_mib"] = round(db.stat().st_size / 2**20, 1)
        with MCPToolBox(env={"APPLIANCE_HOME": big}) as box:
            queries, failed = umls_queries(box, random.Random(11), n, concepts)
            report["concept_search_100k"]["query_lookups_failed"] = failed
            report["concept_search_100k"].update(bench_concept_search(box, queries))

    if trials:
        report["trial_search"] = run_trial_section(n, trials)
    if verify_rows:
        report["audit_verify"] = bench_audit_verify(verify_rows)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report, concepts)
        if trials:
            print_trial_section(report["trial_search"])
        if verify_rows:
            print_audit_verify(report["audit_verify"])
    return 0
