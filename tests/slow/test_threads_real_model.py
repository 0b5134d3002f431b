"""The thread policy on the real model: the count chosen per call is the one llama.cpp's context
holds, and two model processes on one machine both finish a turn. Timing targets live in
``appliance bench contention`` (printed there), never here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from appliance.llm.threads import Threads
from common.locations import PROJECT_ROOT, models_dir
from models.assemble import assemble_default_model
from models.profiles import get_profile

pytestmark = pytest.mark.timeout(900)


class Load:
    """A scripted reading of the others' load, on two cores."""

    cores = 2

    def __init__(self, others: float):
        self.value = others

    def others(self) -> float:
        return self.value


def _context_threads(model) -> Threads:
    import llama_cpp

    ctx = model._llm._ctx.ctx
    return Threads(llama_cpp.llama_n_threads(ctx), llama_cpp.llama_n_threads_batch(ctx))


def test_the_count_chosen_per_call_reaches_llama_cpp():
    from appliance.agent.schemas import IntentClassification
    from appliance.llm.llama import LlamaModel
    from appliance.llm.prompt import Message

    model = LlamaModel(get_profile("gemma3-270m"), assemble_default_model(models_dir()))
    assert model.threads.override is None  # no APPLIANCE_N_THREADS: the policy decides
    messages = [Message("system", "Classify the clinician's request."), Message("user", "What is hypertension?")]
    seen = []
    for others, expected in ((1.0, Threads(1, 1)), (0.0, Threads(2, 2)), (1.0, Threads(1, 1))):
        model.threads.sampler = Load(others)
        model.threads.set_override(None)  # read the load at the next call, not after the refresh
        model.generate_constrained("INTENT_CLASSIFY", messages, IntentClassification, temperature=0.0,
                                   max_tokens=64)
        seen.append(_context_threads(model))
        assert (model._llm.n_threads, model._llm.context_params.n_threads_batch) == (expected.decode, expected.batch)
    assert seen == [Threads(1, 1), Threads(2, 2), Threads(1, 1)]
    model.threads.set_override(2)  # the operator's override wins over any load
    model.generate_free("SYNTHESIZE", messages, temperature=0.0, max_tokens=8)
    assert _context_threads(model) == Threads(2, 2)


def test_the_batch_context_follows_the_load_at_every_step():
    import llama_cpp

    from appliance.agent.schemas import IntentClassification
    from appliance.llm.batch import BatchJob
    from appliance.llm.llama import LlamaModel
    from appliance.llm.prompt import Message

    model = LlamaModel(get_profile("gemma3-270m"), assemble_default_model(models_dir()))
    messages = [Message("system", "Classify the clinician's request."), Message("user", "What is hypertension?")]
    seen: list[int] = []
    follow = model._follow_load

    def spy(ctx) -> None:
        follow(ctx)
        seen.append(llama_cpp.llama_n_threads_batch(ctx))
        model.threads.sampler = Load(1.0)  # a busy process appears after the first step
        model.threads.set_override(None)

    model._follow_load = spy
    model.threads.sampler = Load(0.0)
    results = model.generate_constrained_batch([BatchJob(messages, IntentClassification, 0.0, 64)] * 2, parallel=2)
    assert all(r.error is None for r in results)
    assert seen[0] == 2 and len(seen) > 2 and set(seen[1:]) == {1}, seen


def test_a_second_model_process_beside_a_turn_both_finish(tmp_path):
    """`appliance ask` in its own process while this process answers a turn: both answer (the
    times are the contention bench's figures, not asserted here)."""
    from appliance.agent.graph import Agent
    from appliance.config import Settings
    from appliance.llm.llama import LlamaModel
    from appliance.tools.base import deny_all
    from appliance.tools.mcp_client import MCPToolBox

    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    env.pop("APPLIANCE_N_THREADS", None)  # both processes on the thread policy
    env.pop("APPLIANCE_MODEL_SERVER", None)
    subprocess.run([sys.executable, "-m", "appliance.cli", "init", "--no-model"], cwd=PROJECT_ROOT, env=env,
                   check=True, capture_output=True, timeout=300)
    model = LlamaModel(get_profile("gemma3-270m"), assemble_default_model(models_dir()))
    second = subprocess.Popen([sys.executable, "-m", "appliance.cli", "ask", "--json", "What is hypertension?"],
                              cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with MCPToolBox(env={"APPLIANCE_HOME": str(tmp_path)}) as tools:
            result = Agent(model, tools, Settings(), deny_all, drugs=None).run_turn("Check FDA warnings for dofetilide")
        out, err = second.communicate(timeout=700)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert result.path[-1] == "SYNTHESIZE", result.path
    assert second.returncode == 0, err[-3000:]
    assert json.loads(out)["response"]


@pytest.mark.heavy
def test_the_contention_bench_reports_each_condition_and_leaves_no_process(tmp_path):
    """`appliance bench contention --json`: every condition with its turns, ratio and (in process)
    the threads chosen; the bench's busy processes are gone when it returns."""
    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    env.pop("APPLIANCE_N_THREADS", None)
    proc = subprocess.run([sys.executable, "-m", "appliance.cli", "bench", "contention", "--turns", "1", "--json"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    rows = report["in_process"]
    assert {"idle", "1_busy", "second_model", "idle_all_cores_fixed"} <= set(rows)
    for name, row in rows.items():
        assert len(row["turns_s"]) == 1 and row["median_turn_s"] > 0 and all(n >= 2 for n in row["model_calls"])
        assert row["vs_idle"] == round(row["median_turn_s"] / rows["idle"]["median_turn_s"], 3)
        if name != "idle_all_cores_fixed":
            assert set(row["decode_threads_chosen"]) <= {str(n) for n in range(1, report["cores"] + 1)}
    assert report["ratios"]["in_process_1_busy_vs_idle"] == rows["1_busy"]["vs_idle"]
    leftover = subprocess.run(["pgrep", "-f", "PR_SET_PDEATHSIG"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout
