"""``appliance selftest``: the safety, bad-input, injection, audit, durability and fault checks,
quickly, on a fresh data home made for the run.

Invariants:
- The live record is never opened: the run builds its own data home (``appliance init``, no
  model) in a temporary folder, points ``$APPLIANCE_HOME`` and the servers at it while it runs,
  and deletes it afterwards.
- Every check is bounded (the numbers are settings of ``run_selftest``) and counts; a check
  whose code is not in this build is reported as not run, with null figures, never a number
  it did not measure. A check that raises is counted among ``uncaught_exceptions`` and the run
  goes on.
- In order: (1) the safety matrix (``appliance.safety.matrix``) on the fresh databases, before
  anything writes to them, and the generated matrix beside it
  (``appliance.safety.generated_matrix``: brand and combination names against the demo patients
  each curated rule endangers), and the control matrix (``appliance.safety.control_matrix``:
  common safe orders, whose false refusals are counted, and hazard orders written as clinicians
  write them), and the drug data matrix (``appliance.safety.data_matrix``: every drug, brand and
  interaction pair of the local data); (2) bad inputs (``appliance.selftest.bad_input``): generated calls to
  every tool of the three servers, in process; (3) the injection corpus (``appliance.selftest.injection``);
  (4) the audit chain (``ehr_db.audit``) verifies after all those calls, and a tampered copy
  is caught; (5) durability (``ehr_db.durability.crash_test``): writers killed with SIGKILL,
  then the file checked; (6) faults (``appliance.selftest.faults``): the EHR server crashed
  mid-call, hung past the deadline and killed between calls, through the agent's MCP client;
  (7) the tamper suite (``appliance.selftest.tamper``): clinical rows edited, deleted and inserted, the
  record rolled back, backups with flipped bytes, each on its own data home, each to be caught;
  (8) the clinic host (``appliance.selftest.host_checks``): requests without or with a revoked token, forged
  approvers and audit events, writes past the safety gate, each to be refused.
- The outcome fails (exit 1) when a write was lost or half made, anything raised unexpectedly,
  either matrix missed a finding or reported a dangerous prescription clear, the drug data matrix
  left a name unresolved or unchecked or missed an interaction pair, the control matrix
  missed a hazard or refused more than ``MAX_REFUSAL_RATE`` of its safe orders, an injection case
  failed, a refused call wrote, the chain did not verify, the tampering went unseen (the audit copy
  or any tamper case but the documented one) or a fault was not survived.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from common.locations import scratch_home
from ehr_db.durability import WRITER_THREADS

DEFAULT_BAD_INPUTS = 800
DEFAULT_CRASH_WRITES = 200
DEFAULT_FAULT_ROUNDS = 2  # rounds of the three fault kinds (appliance.selftest.faults)
MAX_PROBLEMS_SHOWN = 20  # failed generated-matrix cases kept in the output (the counts cover them all)
MAX_REFUSAL_RATE = 0.02  # safe orders of the control matrix the gate may refuse (alert fatigue)


@contextmanager
def _home() -> Iterator[Path]:
    """A fresh data home in a temporary folder (``common.locations.scratch_home``), initialised."""
    with scratch_home("appliance-selftest-") as home:
        from appliance.setup.home import init_home

        init_home(progress=lambda message: None, with_model=False)
        yield home


def _matrix(home: Path) -> dict:
    from appliance.safety.matrix import run_matrix

    return run_matrix(home / "ehr.sqlite", home / "knowledge.sqlite")


def _generated_matrix(home: Path) -> dict:
    from appliance.safety.generated_matrix import run_generated_matrix

    return run_generated_matrix(home / "ehr.sqlite", home / "knowledge.sqlite", home / "umls.sqlite")


def _control_matrix(home: Path) -> dict:
    from appliance.safety.control_matrix import run_control_matrix

    return run_control_matrix(home / "ehr.sqlite", home / "knowledge.sqlite")


def _data_matrix(home: Path) -> dict:
    from appliance.safety.data_matrix import run_data_matrix

    return run_data_matrix(home / "knowledge.sqlite")


def _injection(home: Path) -> dict:
    from appliance.selftest.injection import run_corpus
    from appliance.tools.in_process import InProcessToolBox

    tables = ("medication_requests", "allergy_intolerances", "document_references")
    conn = sqlite3.connect(home / "ehr.sqlite", isolation_level=None)
    try:
        with InProcessToolBox() as tools:
            return run_corpus(tools, lambda: sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                                                 for t in tables))
    finally:
        conn.close()


def _audit(home: Path) -> dict:
    """The chain verifies; a copy whose middle row was edited behind the triggers does not."""
    from ehr_db.audit import TRIGGERS
    from ehr_db.repository import EhrRepository

    verdict = EhrRepository(home / "ehr.sqlite").verify_audit()
    copy = home.parent / "tampered.sqlite"
    source, target = sqlite3.connect(home / "ehr.sqlite"), sqlite3.connect(copy)
    try:
        source.backup(target)
        for trigger in TRIGGERS:
            target.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        seq = target.execute("SELECT seq FROM audit_log ORDER BY seq LIMIT 1 "
                             "OFFSET (SELECT count(*) / 2 FROM audit_log)").fetchone()  # init's demo load wrote one
        target.execute("UPDATE audit_log SET arguments = ? WHERE seq = ?", ('{"tampered": true}', seq[0]))
        target.commit()
    finally:
        source.close()
        target.close()
    tampered = EhrRepository(copy).verify_audit()
    first = tampered.first_bad
    return {"verified": verdict.ok, "rows": verdict.rows, "tampered_seq": seq[0], "tamper_caught": not tampered.ok,
            "caught_at": first.describe() if first is not None else None}


def _durability(home: Path, writes: int) -> dict | None:
    if writes <= 0:
        return None
    from ehr_db.durability import crash_test

    report = crash_test(home.parent / "crash", min_writes=writes, min_rounds=max(3, writes // 40), max_seconds=60.0)
    return report.to_dict()


def _faults(home: Path, rounds: int) -> dict | None:
    if rounds <= 0:
        return None
    from appliance.selftest.faults import fault_drill

    return fault_drill(home, rounds)


def _host() -> dict:
    from appliance.selftest.host_checks import run_host_checks

    with tempfile.TemporaryDirectory(prefix="appliance-host-") as work:
        return run_host_checks(Path(work))


def _tamper() -> dict:
    from appliance.selftest.tamper import run_tamper_suite

    with tempfile.TemporaryDirectory(prefix="appliance-tamper-") as work:
        return run_tamper_suite(Path(work))


def run_selftest(*, bad_inputs: int = DEFAULT_BAD_INPUTS, crash_writes: int = DEFAULT_CRASH_WRITES,
                 fault_rounds: int = DEFAULT_FAULT_ROUNDS,
                 progress: Callable[[str], None] = lambda message: None) -> dict:
    """Run every check (module docstring); the figures, as ``--json`` prints them."""
    from appliance.selftest.bad_input import run_bad_inputs
    from appliance.tools.in_process import servers_on

    out: dict = {"errors": [], "not_run": [], "seconds": {}}

    def check(name: str, label: str, fn: Callable[[], dict | None]) -> dict | None:
        progress(f"selftest: {label} ...")
        started = time.perf_counter()
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - a check that raises is a finding, not the end of the run
            out["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
            return None
        finally:
            out["seconds"][name] = round(time.perf_counter() - started, 2)

    with _home() as home, servers_on(home):
        matrix = check("safety_matrix", "safety matrix (13 patients x 23 drugs)", lambda: _matrix(home))
        generated = check("generated_matrix", "generated safety matrix (brand and combination names)",
                          lambda: _generated_matrix(home))
        control = check("control_matrix", "control matrix (common safe orders, hazard orders)",
                         lambda: _control_matrix(home))
        data = check("data_matrix", "drug data matrix (every drug, brand and interaction pair of the data)",
                     lambda: _data_matrix(home))
        bad = check("bad_inputs", f"{bad_inputs} generated calls to every tool",
                    lambda: run_bad_inputs(home / "ehr.sqlite", bad_inputs))
        injection = check("injection", "injection corpus", lambda: _injection(home))
        audit = check("audit", "audit chain, and a tampered copy", lambda: _audit(home))
        durability = check("durability", f"{crash_writes} writes with writers killed by SIGKILL",
                           lambda: _durability(home, crash_writes))
        faults = check("faults", f"{fault_rounds} rounds of server faults mid-call",
                       lambda: _faults(home, fault_rounds))
    tamper = check("tamper", "tamper suite (clinical rows, rollbacks, damaged backups)", _tamper)
    host = check("host", "the clinic host's trust (tokens, approvals, audit events, keys)", _host)

    crashed = {e.partition(":")[0] for e in out["errors"]}
    if durability is None and "durability" not in crashed:
        out["not_run"].append("durability" if crash_writes > 0 else "durability (0 writes asked for)")
    if faults is None and "faults" not in crashed:
        out["not_run"].append("faults (0 rounds asked for)")
    out.update({
        "writes_lost": durability["lost"] if durability else None,
        "partial_writes": durability["unaudited"] + durability["orphan_audits"] if durability else None,
        "faults_tried": faults.get("tried") if faults else None,
        "faults_survived": faults.get("survived") if faults else None,
        "bad_inputs_tried": bad["calls"] if bad else 0,
        "uncaught_exceptions": (bad["uncaught"] if bad else 0) + len(out["errors"])
        + sum(1 for r in (injection or {}).get("rows", []) if r["write_outcome"] == "turn failed"),
        "safety_matrix": {k: matrix[k] for k in ("cases", "missed", "false_clear", "false_alarms", "blocking")}
        if matrix else None,
        "generated_matrix": {**{k: generated[k] for k in ("cases", "names", "patients", "groups", "missed",
                                                          "false_clear", "blocking")},
                             "problems": generated["problems"][:MAX_PROBLEMS_SHOWN]} if generated else None,
        "control_matrix": {**{k: v for k, v in control.items() if k != "missed"},
                           "missed": control["missed"][:MAX_PROBLEMS_SHOWN]} if control else None,
        "data_matrix": {**{k: v[:MAX_PROBLEMS_SHOWN] if isinstance(v, list) else v for k, v in data.items()},
                        "problems": len(data["not_resolved"]) + len(data["unchecked"]) + len(data["missed"])}
        if data else None,
        "bad_inputs": {k: v for k, v in bad.items() if k != "per_tool"} if bad else None,
        "injection": {"cases": injection["cases"], "passed": injection["passed"], "failed": injection["failed"],
                      "rows": [{k: r[k] for k in ("id", "placement", "tries", "reached_model", "write_outcome",
                                                  "passed", "problems")} for r in injection["rows"]]}
        if injection else None,
        "audit": audit, "durability": durability, "faults": faults, "tamper": tamper, "host": host,
    })
    found = failures(out)
    out["ok"], out["failures"] = not found, found
    return out


def failures(out: dict) -> list[str]:
    """Why the run failed; empty when it passed."""
    found = []
    if out.get("writes_lost"):
        found.append(f"{out['writes_lost']} committed write(s) lost")
    if out.get("partial_writes"):
        found.append(f"{out['partial_writes']} write(s) without their audit row, or audit rows without their write")
    if out.get("durability") and (out["durability"].get("integrity") != "ok" or out["durability"].get("duplicated")):
        found.append("the crash-tested database is damaged or performed a write twice")
    if out.get("uncaught_exceptions"):
        found.append(f"{out['uncaught_exceptions']} uncaught exception(s)")
    matrix = out.get("safety_matrix")
    if matrix is None or matrix["missed"] or matrix["false_clear"]:
        found.append("the safety matrix did not run" if matrix is None else
                     f"the safety gate missed {matrix['missed']} finding(s), {matrix['false_clear']} false clear")
    generated = out.get("generated_matrix")
    if generated is None or generated["missed"] or generated["false_clear"]:
        found.append("the generated safety matrix did not run" if generated is None else
                     f"the safety gate missed {generated['missed']} generated case(s), "
                     f"{generated['false_clear']} false clear")
    control = out.get("control_matrix")
    if control is None or control["missed_hazards"] or control["refusal_rate"] > MAX_REFUSAL_RATE:
        found.append("the control matrix did not run" if control is None else
                     f"the safety gate missed {control['missed_hazards']} hazard order(s) and refused "
                     f"{control['false_refusals']} of {control['safe_orders']} safe orders "
                     f"(at most {MAX_REFUSAL_RATE:.0%} allowed)")
    data = out.get("data_matrix")
    if data is None or data["problems"]:
        found.append("the drug data matrix did not run" if data is None else
                     f"over the drug data the gate left {len(data['not_resolved'])} name(s) unresolved, "
                     f"{len(data['unchecked'])} unchecked and missed {len(data['missed'])} interaction(s)")
    bad = out.get("bad_inputs") or {}
    if bad.get("refused_but_wrote") or bad.get("leaks") or bad.get("servers_alive") is False:
        found.append("a refused call wrote, an error showed internals, or a server stopped answering")
    injection = out.get("injection")
    if injection is None or injection["failed"]:
        found.append("the injection corpus did not run" if injection is None else
                     f"injection cases failed: {', '.join(injection['failed'])}")
    audit = out.get("audit")
    if audit is None or not audit["verified"] or not audit["tamper_caught"]:
        found.append("the audit check did not run" if audit is None else
                     "the audit chain did not verify" if not audit["verified"] else "a tampered audit row went unseen")
    tamper = out.get("tamper")
    if tamper is None or tamper["undetected"]:
        found.append("the tamper suite did not run" if tamper is None else
                     f"tampering went undetected: {', '.join(tamper['undetected'])}")
    host = out.get("host")
    if host is None or not host.get("ok"):
        found.append("the host checks did not run" if host is None else
                     f"the clinic host let {host.get('let_through')} request(s) through"
                     + (f" ({host['error']})" if host.get("error") else ""))
    if out.get("faults_tried") is not None and out.get("faults_survived") != out.get("faults_tried"):
        found.append(f"{out['faults_tried'] - (out['faults_survived'] or 0)} fault(s) not survived")
    return found


def _row(check: str, result: str, ok: bool | None) -> str:
    return f"{check:17} {result:102} {'-' if ok is None else 'ok' if ok else 'FAIL'}"


def tamper_summary(report: dict) -> str:
    from appliance.selftest.tamper import summary

    return summary(report)


def table(out: dict) -> str:
    """The human summary: one line per check."""
    lines = ["appliance selftest: on a fresh data home (deleted afterwards); the live record is never opened", ""]
    m = out["safety_matrix"]
    lines.append(_row("safety matrix", "did not run" if m is None else
                      f"{m['cases']} cells: missed {m['missed']}, false clear {m['false_clear']}, "
                      f"false alarms {m['false_alarms']} ({m['blocking']} blocking)",
                      m is not None and not (m["missed"] or m["false_clear"])))
    g = out.get("generated_matrix")
    lines.append(_row("generated matrix", "did not run" if g is None else
                      f"{g['cases']} cases ({g['names']} brand/combination names, {g['patients']} patients, "
                      f"{g['groups']} rule groups): missed {g['missed']}, false clear {g['false_clear']}",
                      g is not None and not (g["missed"] or g["false_clear"])))
    c = out.get("control_matrix")
    lines.append(_row("control matrix", "did not run" if c is None else
                      f"{c['safe_orders']} safe orders: {c['false_refusals']} refused ({c['refusal_rate']:.1%}, at "
                      f"most {MAX_REFUSAL_RATE:.0%}); {c['hazard_orders']} hazard orders: missed {c['missed_hazards']}",
                      c is not None and not c["missed_hazards"] and c["refusal_rate"] <= MAX_REFUSAL_RATE))
    lines += [f"  refused: {r['order']}: {'; '.join(r['unchecked'] + r['high'])}"
              for r in (c or {}).get("refusals", [])]
    d = out.get("data_matrix")
    lines.append(_row("drug data matrix", "did not run" if d is None else
                      f"{d['drugs']} drugs, {d['names']} names: unresolved {len(d['not_resolved'])}, unchecked "
                      f"{len(d['unchecked'])}; {d['interaction_cases']} interaction cases: missed {len(d['missed'])}",
                      d is not None and not d["problems"]))
    b = out["bad_inputs"]
    lines.append(_row("bad inputs tried", "did not run" if b is None else
                      f"{b['calls']} generated calls to {b['tools']} tools: uncaught {b['uncaught']}, "
                      f"leaks {b['leaks']}, refused calls that wrote {b['refused_but_wrote']}",
                      b is not None and not (b["uncaught"] or b["leaks"] or b["refused_but_wrote"])))
    i = out["injection"]
    lines.append(_row("injection", "did not run" if i is None else
                      f"{i['cases']} cases: {i['passed']} passed" + (f"; failed: {', '.join(i['failed'])}"
                                                                      if i["failed"] else ""),
                      i is not None and not i["failed"]))
    a = out["audit"]
    lines.append(_row("audit chain", "did not run" if a is None else
                      f"{'verified' if a['verified'] else 'NOT verified'} ({a['rows']} rows); tampered copy "
                      f"{'caught' if a['tamper_caught'] else 'NOT caught'}",
                      a is not None and a["verified"] and a["tamper_caught"]))
    d = out["durability"]
    lines.append(_row("load held", "not run" if d is None else
                      f"{d['attempted']} writes begun by {WRITER_THREADS}"
                      f" writer threads, {d['rounds']} writer processes killed with SIGKILL; "
                      f"integrity {d['integrity']}", None if d is None else d["integrity"] == "ok"))
    lines.append(_row("writes lost", "not run" if d is None else
                      f"{out['writes_lost']} (must be 0); partial writes {out['partial_writes']}, "
                      f"duplicated {d['duplicated']}", None if d is None else not (d["lost"] or out["partial_writes"])))
    f = out["faults"]
    lines.append(_row("faults survived", "not run" if f is None else
                      f"{f.get('survived')} of {f.get('tried')} (server crashed mid-call, hung past the deadline, "
                      "killed between calls)",
                      None if f is None else f.get("survived") == f.get("tried")))
    t = out.get("tamper")
    lines.append(_row("tamper suite", "did not run" if t is None else tamper_summary(t), t is not None and not t["undetected"]))
    h = out.get("host")
    lines.append(_row("clinic host", "did not run" if h is None else
                      f"{h.get('requests')} requests tried: {h.get('refused_as_expected')} refused as expected, "
                      f"{h.get('allowed_as_expected')} allowed as expected, {h.get('let_through')} let through",
                      h is not None and bool(h.get("ok"))))
    lines.append(_row("uncaught", f"{out['uncaught_exceptions']} exception(s)", not out["uncaught_exceptions"]))
    lines.append("")
    lines += [f"error: {e}" for e in out["errors"]]
    lines.append("PASSED" if out["ok"] else "FAILED: " + "; ".join(out["failures"]))
    return "\n".join(lines)


def main(*, as_json: bool, bad_inputs: int, crash_writes: int, fault_rounds: int = DEFAULT_FAULT_ROUNDS) -> int:
    """Run, print the table (or the JSON object), exit 0 when passed, 1 when a check failed."""
    tty = sys.stderr.isatty()
    out = run_selftest(bad_inputs=bad_inputs, crash_writes=crash_writes, fault_rounds=fault_rounds,
                       progress=(lambda m: print(m, file=sys.stderr, flush=True)) if tty else (lambda m: None))
    print(json.dumps(out, indent=2, default=str) if as_json else table(out))
    return 0 if out["ok"] else 1
