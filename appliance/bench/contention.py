"""``appliance bench contention``: the same turns on an idle machine and beside busy processes the
bench starts itself, in process (and through a clinic host with ``--with-host``).

Invariants:
- Conditions, each answering the same turns (``QUESTIONS`` in turn: the model classifies the
  intent, then answers; the model calls are counted per turn), after one untimed warm turn: idle; N CPU-bound processes for N = 1 and
  cores - 1 (once when they are equal); one second model process (the same model and thread
  policy, decoding free text in a loop). In process, also idle with every core fixed (the count
  before the thread policy), so the policy's idle cost is measured beside it.
- The busy processes are ``appliance.bench.busy``'s: children that die with the bench, stopped
  when each condition ends, however it ends.
- A turn is timed wall-clock; the median per condition and its ratio to idle are printed;
  nothing is asserted (targets live in the README). In process, the decode threads the policy
  chose in each condition are counted and reported.
"""

from __future__ import annotations

import json
import os
import statistics

from appliance.bench.busy import busy, stoppable
from appliance.config import Settings
from appliance.errors import ApplianceError
from common import environment
from common.locations import scratch_home


def _plan(cores: int) -> list[tuple[str, int, int]]:
    """(condition, CPU-bound processes, model processes), idle first."""
    counts = sorted({1, max(1, cores - 1)})
    return ([("idle", 0, 0)] + [(f"{n}_busy", n, 0) for n in counts] + [("second_model", 0, 1)])


# Questions the model answers itself (intent, then the answer): every turn is model-bound, so a
# condition's figure is the model's under that load, whatever code answers without the model.
QUESTIONS = ("What is hypertension?", "What is atrial fibrillation?", "What is chronic kidney disease?")


def _turns(model, tool_env: dict, settings: Settings, turns: int, kept: dict) -> list[tuple[float, int]]:
    """(wall-clock seconds, model calls) of each turn, the questions in turn; ``kept`` carries the
    drug recogniser the first turn ever built to every later one (as a terminal keeps it)."""
    import time

    from appliance.agent.graph import Agent
    from appliance.bench.decoding import RecordingModel
    from appliance.tools.base import deny_all
    from appliance.tools.mcp_client import MCPToolBox

    out = []
    with MCPToolBox(env=tool_env) as tools:
        for i in range(turns):
            recording = RecordingModel(model, {"INTENT_CLASSIFY": [
                {"intent": "DIRECT", "task_summary": "A definition.", "suggested_tool": None}]})
            started = time.perf_counter()
            agent = Agent(recording, tools, settings, deny_all, drugs=kept.get("drugs"))
            agent.run_turn(QUESTIONS[i % len(QUESTIONS)])
            out.append((time.perf_counter() - started, len(recording.calls)))
            kept["drugs"] = agent.drugs
    return out


def _row(timed: list[tuple[float, int]], cpu: int, models: int, chosen: dict | None) -> dict:
    seconds = [s for s, _ in timed]
    row = {"busy_processes": cpu, "model_processes": models, "turns_s": [round(s, 2) for s in seconds],
           "model_calls": [n for _, n in timed], "median_turn_s": round(statistics.median(seconds), 3)}
    if chosen is not None:
        row["decode_threads_chosen"] = {str(k): v for k, v in sorted(chosen.items())}
    return row


def _conditions(model, tool_env: dict, settings: Settings, turns: int, cores: int, governor) -> dict:
    # the second model process: this bench's profile, in its own process (never the host's)
    env = {**os.environ, "APPLIANCE_MODEL": settings.model}  # a Settings field
    env.pop(environment.MODEL_SERVER, None)
    kept: dict = {}
    _turns(model, tool_env, settings, 1, kept)  # warm: this process, the servers, the prefix snapshots
    rows: dict[str, dict] = {}
    if governor is not None and governor.override is None:
        governor.set_override(cores)
        try:
            rows["idle_all_cores_fixed"] = _row(_turns(model, tool_env, settings, turns, kept), 0, 0, None)
        finally:
            governor.set_override(None)
    for name, cpu, models in _plan(cores):
        with busy(cpu, models, env):
            if governor is not None:
                governor.chosen.clear()
            seconds = _turns(model, tool_env, settings, turns, kept)
            rows[name] = _row(seconds, cpu, models, dict(governor.chosen) if governor is not None else None)
    idle = rows["idle"]["median_turn_s"]
    for row in rows.values():
        row["vs_idle"] = round(row["median_turn_s"] / idle, 3) if idle else None
    return rows


def run_contention_bench(settings: Settings, turns: int, with_host: bool, as_json: bool) -> int:
    from appliance.host.serve import host_urls
    from appliance.llm.server import ServerModel
    from appliance.llm.threads import usable_cores
    from appliance.runtime import load_model
    from appliance.setup.home import init_home

    if turns < 1:
        raise ApplianceError("--turns takes at least 1")
    cores = usable_cores()
    local_settings = settings.model_copy(update={"model_server": None})
    report: dict = {"model": settings.model, "cores": cores, "turns_per_condition": turns,
                    "thread_policy": (f"fixed: APPLIANCE_N_THREADS={settings.n_threads}" if settings.n_threads
                                      else "per call, the free cores (appliance.llm.threads)")}
    with stoppable(), scratch_home("appliance-bench-contention-") as home:
        init_home(progress=lambda _m: None, with_model=False)
        model = load_model(local_settings)
        report["in_process"] = _conditions(model, {environment.HOME: str(home)}, local_settings, turns, cores,
                                           getattr(model, "threads", None))
        del model
        if with_host:
            from appliance.bench.clinic import clinic_host

            with clinic_host(settings, home, 1) as url:
                urls = host_urls(url)
                model_url = urls.pop(environment.MODEL_SERVER)
                report["host"] = _conditions(ServerModel(model_url), {**urls, environment.HOME: str(home)},
                                             settings, turns, cores, None)
    report["ratios"] = {f"{where}_{name}_vs_idle": row["vs_idle"]
                        for where in ("in_process", "host") if where in report
                        for name, row in report[where].items() if name != "idle"}
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


def print_report(report: dict) -> None:
    cores, turns = report["cores"], report["turns_per_condition"]
    print(f"contention bench ({report['model']}, {cores} cores, {turns} turns per condition, wall-clock per "
          f"turn; threads: {report['thread_policy']})")
    print(f"{'where':12}{'condition':24}{'median s':>10}{'vs idle':>9}  turns s / decode threads chosen")
    for where in ("in_process", "host"):
        for name, row in report.get(where, {}).items():
            chosen = row.get("decode_threads_chosen")
            print(f"{where:12}{name:24}{row['median_turn_s']:>10}{row['vs_idle']:>9}  {row['turns_s']}"
                  + (f" / {chosen}" if chosen else ""))
