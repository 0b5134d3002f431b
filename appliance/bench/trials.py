"""``appliance bench tools``, trial-search section: find_clinical_trials and get_trial_details
on a cache of 50,000 trials, as the agent and the prescreen call them (over stdio).

Invariants:
- The cache is built by the bulk-import code path (``knowledge.synthetic.write_bulk_zip`` writes
  a zip of one API v2 JSON file per study, as ClinicalTrials.gov's download is laid out, and
  ``import_ctgov_studies`` imports it) in a child process, whose own peak RSS is reported: the
  import's memory, not the benchmark's.
- The studies are generated from the real sample records by varying their fields (see
  ``mcp_servers.knowledge.synthetic``); the report says so. Queries are drawn with a fixed seed
  from the same vocabularies, with and without the prescreen's patient filters.
- Prints figures (p50/p95 per kind of query, and over all searches); asserts nothing. Failed
  calls are counted apart (``not_found`` is a normal answer for a filtered search, and is timed
  as one: the server did the whole search to say so).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from appliance.bench.timing import DEADLINE, Timing, percentiles, time_calls

KEYWORDS = ("pregnancy", "informed consent", "platelet", "chemotherapy", "life expectancy", "ECOG",
            "creatinine", "bilirubin", "hemodialysis", "smoker")
PHASES = ("phase1", "phase2", "phase3", "phase4", "not_applicable")

# The child's own peak RSS: /proc's VmHWM belongs to the process image (ru_maxrss would carry
# the parent's size over from the fork).
_IMPORT = """
import json, re, resource, sys, time
from pathlib import Path
from mcp_servers.knowledge.importers.driver import import_ctgov_studies

def peak_mib():
    try:
        status = Path("/proc/self/status").read_text()
        return round(int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) / 1024, 1)
    except (OSError, AttributeError):
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

before = peak_mib()
started = time.perf_counter()
report = import_ctgov_studies(Path(sys.argv[1]), Path(sys.argv[2]))
print(json.dumps({"seconds": round(time.perf_counter() - started, 1), "records": report.records,
                  "inserted": report.inserted, "peak_rss_mib": peak_mib(), "rss_before_import_mib": before}))
"""


def build_cache(home: Path, n: int) -> dict:
    """Write the bulk zip, import it in a child process; figures of both."""
    from mcp_servers.knowledge.store import ensure_database
    from mcp_servers.knowledge.synthetic import write_bulk_zip

    db = home / "knowledge.sqlite"
    ensure_database(db)
    archive = home / "ctg-studies.json.zip"
    started = time.perf_counter()
    write_bulk_zip(archive, n)
    written = time.perf_counter() - started
    child = subprocess.run([sys.executable, "-c", _IMPORT, str(archive), str(db)], capture_output=True, text=True,
                           env={**os.environ, "APPLIANCE_HOME": str(home)}, check=False)
    if child.returncode != 0:
        raise RuntimeError(f"the trial import failed: {child.stderr.strip().splitlines()[-1:]}")
    figures = json.loads(child.stdout.strip().splitlines()[-1])
    figures.update(zip_seconds=round(written, 1), zip_mib=round(archive.stat().st_size / 2**20, 1),
                   db_mib=round(db.stat().st_size / 2**20, 1))
    archive.unlink()
    return figures


def trial_queries(rng: random.Random, n: int) -> dict[str, list[dict]]:
    """``n`` searches of each kind, drawn from the generator's vocabularies."""
    from mcp_servers.knowledge.synthetic import EXTRA_CONDITIONS, sample_records

    base = sample_records()
    # The tool takes up to 60 characters of condition or intervention (contracts.Name).
    conditions = sorted(c for c in {c for t in base for c in t.get("conditions") or []} | set(EXTRA_CONDITIONS)
                        if len(c) <= 60)
    interventions = sorted({i for t in base for i in t.get("interventions") or [] if len(i) <= 60})

    def patient() -> dict:
        return {"status": "recruiting", "sex": rng.choice(("female", "male")), "patient_age": str(rng.randrange(18, 90))}

    return {
        "condition": [{"condition": rng.choice(conditions), "status": "any"} for _ in range(n)],
        "condition + patient": [{"condition": rng.choice(conditions), **patient()} for _ in range(n)],
        "+ intervention": [{"condition": rng.choice(conditions), "intervention": rng.choice(interventions),
                            "status": "any"} for _ in range(n)],
        "+ eligibility words": [{"condition": rng.choice(conditions), "eligibility_keywords": rng.choice(KEYWORDS),
                                 **patient()} for _ in range(n)],
        "+ phase, type, 50/page": [{"condition": rng.choice(conditions), "phase": rng.choice(PHASES),
                                   "study_type": "interventional", "status": "any", "page_size": "50"} for _ in range(n)],
    }


def bench_trials(box, n: int, trials: int, rng: random.Random) -> dict:
    """p50/p95 of each kind of search and of trial details, over stdio (warm server)."""
    started = time.perf_counter()
    box.call_server("knowledge", "find_clinical_trials", {"condition": "mesothelioma", "status": "any"}, DEADLINE)
    report: dict = {"first_call_seconds": round(time.perf_counter() - started, 2)}
    everything: list[float] = []
    for kind, args_list in trial_queries(rng, n).items():
        timing, answered = Timing(), 0
        for args in args_list:
            full = {k: None for k in ("intervention", "eligibility_keywords", "status", "phase", "sex", "patient_age",
                                      "study_type", "page_size")} | args
            t0 = time.perf_counter()
            outcome = box.call_server("knowledge", "find_clinical_trials", full, DEADLINE)
            timing.record(outcome, time.perf_counter() - t0, answers=("not_found",))
            answered += bool(outcome.ok)
        everything += timing.seconds
        report[kind] = {**timing.summary(), "found_some": answered}
    report["all searches"] = {**percentiles(everything), "ok": len(everything)} if everything else {}
    details = time_calls(box, "knowledge", "get_trial_details",
                         [{"nct_id": f"NCT8{rng.randrange(trials):07d}"} for _ in range(n)])
    report["get_trial_details"] = {**details.summary(), "found_some": len(details.seconds)}
    return report


def run_trial_section(n_calls: int, trials: int) -> dict:
    """Build the cache in a private data home, then time the searches over stdio."""
    import tempfile

    from appliance.tools.mcp_client import MCPToolBox

    with tempfile.TemporaryDirectory(prefix="appliance-bench-trials-") as home:
        build = build_cache(Path(home), trials)
        with MCPToolBox(env={"APPLIANCE_HOME": home}) as box:
            searches = bench_trials(box, n_calls, trials, random.Random(23))
    return {"trials": trials, "build": build, "searches": searches,
            "data": "synthetic: generated from the 126 real ClinicalTrials.gov sample records by varying "
                    "conditions, status, phases, ages, sex, sites and arms (mcp_servers/knowledge/synthetic.py)"}


def _ms(value) -> str:
    return f"{value:8.2f}" if value is not None else f"{'-':>8}"


def print_trial_section(section: dict) -> None:
    build, searches = section["build"], section["searches"]
    print(f"\nfind_clinical_trials on {section['trials']:,} trials ({section['data']}):")
    print(f"  import of the bulk-download zip ({build['zip_mib']} MiB, one JSON file per study): "
          f"{build['seconds']} s, peak RSS {build['peak_rss_mib']} MiB ({build['rss_before_import_mib']} MiB "
          f"before the first study), database {build['db_mib']} MiB")
    print(f"  first call (server start, opening the file): {searches['first_call_seconds']} s")
    print(f"  {'query (stdio, warm)':28} {'n':>4} {'found':>5} {'failed':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for kind, p in searches.items():
        if not isinstance(p, dict) or kind == "all searches":
            continue
        print(f"  {kind:28} {p['n']:4d} {p.get('found_some', p['ok']):5d} {p['failed']:6d} "
              f"{_ms(p['p50_ms'])} {_ms(p['p95_ms'])}")
    overall = searches.get("all searches") or {}
    if overall:
        print(f"  all searches: n={overall['n']} p50 {overall['p50_ms']} ms, p95 {overall['p95_ms']} ms")


__all__ = ["bench_trials", "build_cache", "print_trial_section", "run_trial_section", "trial_queries"]
