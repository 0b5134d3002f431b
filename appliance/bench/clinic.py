"""``appliance bench clinic``: turn latency with 1, 2 and 4 terminals sharing one clinic host,
side by side with the model in the terminal's own process.

Invariants:
- Real parts on loopback: the host is ``appliance serve`` (llama.cpp's server with the profile's
  model file and the three MCP servers over HTTP) on a scratch data home; each terminal is an
  agent in its own thread with its own ``ServerModel`` and MCP client. The in-process baseline
  is one agent with the model loaded here and the same HTTP MCP servers, so only where the
  model runs differs.
- Every configuration answers the same turns: the decoding bench's three paths (DIRECT,
  SINGLE_TOOL, MULTI_TOOL; branching decisions overridden after the real call, as there), each
  terminal starting at a different path so concurrent terminals do not ask in lockstep.
- One untimed MULTI_TOOL turn in process warms the host's MCP servers and this process before
  anything is timed, so the first configuration measured pays no start-up the others skip.
- A turn is timed wall-clock from question to answer. Figures and ratios are printed; nothing is
  asserted. The host decodes ``max(terminals)`` requests side by side (``--slots``).
- Turns code answers alone (no model call) take milliseconds, so the median turn can be one of
  them; the median over turns that called the model is reported beside it, with its ratio.
- One terminal on the host runs straight after the in-process turns, before anything else, so
  the one-terminal ratio compares two runs on the same machine load. Both runs' free-text calls
  are reported (count, median length, seconds a token): a turn ratio away from 1 is then either
  the decoding speed or how much text each runtime wrote.
- Constrained calls alone: every constrained call the in-process turns made (its messages,
  schema, temperature and token limit) is timed again in process and then on the idle host,
  one after another, ``CALL_REPEATS`` times each; the ratio is the median over calls of host
  over in process, so where the time goes in a turn and in one decoder are reported apart.
- Free decodes side by side: for each terminal count n, n free decodes at once on the idle
  host, the median seconds a token, and its ratio to one alone: what the machine itself gives n
  terminals (on 2 cores, 4 decodes at once take 2.4x as long a token as one), the floor under
  the per-turn ratio of n terminals to one.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from appliance.config import Settings
from appliance.errors import ApplianceError
from common import environment
from common.locations import PROJECT_ROOT, scratch_home

PATHS = ("DIRECT", "SINGLE_TOOL", "MULTI_TOOL")
CALL_REPEATS = 3
DECODE_TOKENS = 64  # each free decode of the side-by-side measure


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that bind now, below the kernel's
    ephemeral range: the many short connections a run makes (each model request its own) take
    their local ports from that range, and one could take a port between this check and the
    server's bind (seen in a test: `appliance serve`'s fourth port, "address already in use")."""
    import random
    import socket

    low = 32768
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()
    for _ in range(200):
        first = rng.randrange(max(1024, low // 2), low - count)
        socks: list = []
        try:
            for port in range(first, first + count):
                socks.append(socket.socket())
                socks[-1].bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise ApplianceError(f"no {count} consecutive free loopback ports below {low} for the clinic host")


@contextmanager
def clinic_host(settings: Settings, home: Path, slots: int) -> Iterator[str]:
    """``appliance serve`` on loopback over ``home``; yields its URL once every server answers."""
    from appliance.host.serve import SERVERS, host_urls

    port = free_ports(len(SERVERS) + 1)
    env = {**os.environ, environment.HOME: str(home), "APPLIANCE_MODEL": settings.model}  # a Settings field
    log = home / "clinic-host.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "appliance.cli", "serve", "--port", str(port),
                                 "--slots", str(slots)], cwd=PROJECT_ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        urls = host_urls(url)
        _wait(proc, log, [f"{urls[environment.MODEL_SERVER]}/health"]
              + [urls[environment.server_url_variable(name)] for name in environment.SERVERS])
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait(proc: subprocess.Popen, log: Path, urls: list[str], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    pending = list(urls)
    while pending:
        if proc.poll() is not None:
            raise ApplianceError(f"the clinic host stopped while starting: {log.read_text(errors='replace')[-500:]}")
        if time.monotonic() > deadline:
            raise ApplianceError(f"the clinic host did not answer within {seconds:.0f} s: {', '.join(pending)}")
        try:
            with urllib.request.urlopen(pending[0], timeout=2):
                pending.pop(0)
        except urllib.error.HTTPError:
            pending.pop(0)  # an MCP endpoint answers a plain GET with an HTTP error: it is listening
        except OSError:
            time.sleep(0.2)


def _terminal(model, tool_env: dict, settings: Settings, turns: int, first_path: int,
              calls: list | None = None, free: list | None = None) -> list[dict]:
    """One terminal's turns (its own agent and MCP client), each timed; the constrained calls
    they made are added to ``calls`` and their free-text calls' (tokens, seconds) to ``free``,
    when given."""
    from appliance.agent.graph import Agent
    from appliance.bench.decoding import RecordingModel, _path_overrides
    from appliance.tools.base import deny_all
    from appliance.tools.mcp_client import MCPToolBox

    out = []
    drugs = None  # built by the terminal's first turn (from its tools), then kept
    with MCPToolBox(env=tool_env) as tools:
        for i in range(turns):
            path = PATHS[(first_path + i) % len(PATHS)]
            query, overrides = _path_overrides(path)
            recording = RecordingModel(model, overrides)
            agent = Agent(recording, tools, settings, deny_all, drugs=drugs)
            started = time.perf_counter()
            result = agent.run_turn(query)
            drugs = agent.drugs
            if calls is not None:
                calls.extend(c.call for c in recording.calls if c.call is not None)
            if free is not None:
                free.extend((c.completion_tokens, c.seconds) for c in recording.calls if c.schema is None)
            out.append({"path": path, "seconds": time.perf_counter() - started, "nodes": len(result.path),
                        "model_calls": len(recording.calls)})
    return out


def _concurrently(n: int, make_model, tool_env: dict, settings: Settings, turns: int,
                  calls: list | None = None, free: list | None = None) -> dict:
    results: list[list[dict]] = [[] for _ in range(n)]
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            results[i] = _terminal(make_model(), tool_env, settings, turns, i, calls, free)
        except BaseException as exc:  # noqa: BLE001 - reported after the others finish
            errors.append(exc)

    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    if errors:
        raise errors[0]
    return _figures([t for r in results for t in r], wall, n)


def _figures(turns: list[dict], wall: float, terminals: int) -> dict:
    seconds = sorted(t["seconds"] for t in turns)
    model = [t["seconds"] for t in turns if t["model_calls"]]
    return {"terminals": terminals, "turns": len(turns), "median_turn_s": round(statistics.median(seconds), 3),
            "model_turns": len(model),
            "median_model_turn_s": round(statistics.median(model), 3) if model else None,
            "p95_turn_s": round(seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 3),
            "wall_s": round(wall, 2), "turns_per_minute": round(60 * len(turns) / wall, 2),
            "by_path": {p: round(statistics.median([t["seconds"] for t in turns if t["path"] == p]), 3)
                        for p in PATHS if any(t["path"] == p for t in turns)}}


def _time_calls(model, calls: list) -> list[float]:
    """Each constrained call's median seconds over ``CALL_REPEATS`` runs on ``model``."""
    from appliance.errors import GenerationError

    medians = []
    for messages, schema, temperature, max_tokens in calls:
        seconds = []
        for _ in range(CALL_REPEATS):
            started = time.perf_counter()
            try:
                model.generate_constrained("BENCH", messages, schema, temperature=temperature, max_tokens=max_tokens)
            except GenerationError:
                pass  # timed all the same: both runtimes are asked the same
            seconds.append(time.perf_counter() - started)
        medians.append(statistics.median(seconds))
    return medians


def _decode_side_by_side(model_url: str, n: int) -> float:
    """Median seconds a token when ``n`` free decodes run at once in the host's slots: what the
    machine gives n terminals before any agent work (the floor under the per-turn ratios)."""
    from appliance.llm.prompt import Message
    from appliance.llm.server import ServerModel

    per_token: list[float] = []

    def one(i: int) -> None:
        model = ServerModel(model_url)
        model.generate_free("BENCH", [Message("user", f"Write a discharge summary for patient {i}.")],
                            temperature=0.0, max_tokens=DECODE_TOKENS)
        per_token.append(model.last_stats.seconds / max(1, model.last_stats.completion_tokens))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statistics.median(per_token)


def _free_figures(pairs: list[tuple[int, float]]) -> dict:
    """A one-terminal run's free-text calls: how many, their median length, and seconds a token
    over all of them (prompt evaluation included, as a turn pays it)."""
    tokens = sum(t for t, _ in pairs)
    return {"calls": len(pairs), "median_tokens": statistics.median([t for t, _ in pairs]) if pairs else 0,
            "seconds_per_token": round(sum(s for _, s in pairs) / tokens, 4) if tokens else None}


def _free_report(free: dict[str, list]) -> dict:
    """Both one-terminal runs' free-text figures, and the host's seconds a token over the
    in-process one (above 1: the host decodes slower)."""
    report: dict = {where: _free_figures(pairs) for where, pairs in free.items()}
    host, local = report["host"]["seconds_per_token"], report["in_process"]["seconds_per_token"]
    report["host_vs_in_process"] = round(host / local, 3) if host and local else None
    return report


def run_clinic_bench(settings: Settings, terminals: list[int], turns: int, as_json: bool) -> int:
    from appliance.host.serve import host_urls
    from appliance.llm.server import ServerModel
    from appliance.runtime import load_model
    from appliance.setup.home import init_home

    if not terminals or any(n < 1 or n > 16 for n in terminals) or turns < 1:
        raise ApplianceError("--terminals takes counts from 1 to 16 (e.g. 1,2,4) and --turns at least 1")
    local_settings = settings.model_copy(update={"model_server": None})
    with scratch_home("appliance-bench-clinic-") as home:
        init_home(progress=lambda _m: None, with_model=False)
        with clinic_host(settings, home, max(terminals)) as url:
            urls = host_urls(url)
            model_url = urls.pop(environment.MODEL_SERVER)
            tool_env = {**urls, environment.HOME: str(home)}
            local = load_model(local_settings)
            # one untimed turn first, on the path that calls the most tools: the host's MCP
            # servers and this process start warm for every configuration, not only the later ones
            _terminal(local, tool_env, local_settings, 1, PATHS.index("MULTI_TOOL"))
            calls: list = []
            free: dict[str, list] = {"in_process": [], "host": []}
            baseline = _concurrently(1, lambda: local, tool_env, local_settings, turns, calls, free["in_process"])
            # one terminal on the host straight after, so the two figures see the same machine
            first_host = _concurrently(1, lambda: ServerModel(model_url), tool_env, settings, turns,
                                       free=free["host"])
            in_process_calls = _time_calls(local, calls)
            local = None  # the in-process model freed before the host-only rows
            host_calls = _time_calls(ServerModel(model_url), calls)
            decode = {n: _decode_side_by_side(model_url, n) for n in terminals}
            rows = [first_host if n == 1 else _concurrently(n, lambda: ServerModel(model_url), tool_env, settings, turns)
                    for n in terminals]
    one = next((r for r in rows if r["terminals"] == 1), first_host)
    report = {
        "model": settings.model, "turns_per_terminal": turns, "in_process": baseline, "clinic_host": rows,
        "constrained_calls": {"calls": len(calls), "repeats": CALL_REPEATS,
                              "in_process_median_s": round(statistics.median(in_process_calls), 3),
                              "host_median_s": round(statistics.median(host_calls), 3)},
        "free_text_calls": _free_report(free),
        "ratios": {
            "one_terminal_vs_in_process_median_turn": round(one["median_turn_s"] / baseline["median_turn_s"], 3),
            "one_terminal_vs_in_process_median_model_turn": (
                round(one["median_model_turn_s"] / baseline["median_model_turn_s"], 3)
                if one["median_model_turn_s"] and baseline["median_model_turn_s"] else None),
            "constrained_call_host_vs_in_process": round(statistics.median(
                h / max(i, 1e-9) for h, i in zip(host_calls, in_process_calls)), 3),
            **{f"{r['terminals']}_terminals_vs_1_median_turn": round(r["median_turn_s"] / one["median_turn_s"], 3)
               for r in rows if r is not one},
            **{f"{r['terminals']}_terminals_vs_1_turns_per_minute":
               round(r["turns_per_minute"] / one["turns_per_minute"], 3) for r in rows if r is not one},
            **{f"{n}_decodes_vs_1_seconds_per_token": round(decode[n] / decode[min(decode)], 3)
               for n in terminals if n != min(decode)},
        },
        "decode_side_by_side": {"tokens": DECODE_TOKENS,
                                "seconds_per_token": {str(n): round(v, 4) for n, v in decode.items()}},
    }
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"clinic host bench ({settings.model}, {turns} turns per terminal; wall-clock per turn)")
    print(f"{'where the model runs':<28}{'median s':>10}{'p95 s':>10}{'turns/min':>11}{'model turns s':>15}")
    for label, r in [("in process (1 terminal)", baseline)] + [
            (f"host, {r['terminals']} terminal{'s' if r['terminals'] > 1 else ''}", r) for r in rows]:
        print(f"{label:<28}{r['median_turn_s']:>10}{r['p95_turn_s']:>10}{r['turns_per_minute']:>11}"
              f"{str(r['median_model_turn_s']):>15}")
    for where in ("in_process", "host"):
        f = report["free_text_calls"][where]
        print(f"free-text calls {where.replace('_', ' ')} (one terminal): {f['calls']} calls, median "
              f"{f['median_tokens']} tokens, {f['seconds_per_token']} s a token")
    print(f"  free-text seconds a token, host vs in process: {report['free_text_calls']['host_vs_in_process']}")
    c = report["constrained_calls"]
    print(f"constrained calls alone ({c['calls']} from the in-process turns, {c['repeats']} runs each, idle): "
          f"median {c['in_process_median_s']} s in process, {c['host_median_s']} s on the host")
    d = report["decode_side_by_side"]["seconds_per_token"]
    print(f"free decodes side by side on the idle host ({DECODE_TOKENS} tokens each), seconds a token: "
          + ", ".join(f"{n} at once {v}" for n, v in d.items()))
    for name, value in report["ratios"].items():
        print(f"  {name}: {value}")
    return 0
