"""The fast decoder and prefix reuse on the real small model.

The property test decodes ``--decode-samples N`` varied prompts per schema (15 schemas; the
default is in tests/conftest.py, the full run is 500) with the node's own token limit (every
fifth sample a tighter one, to exercise early closing), half greedy and half sampled at T=0.7,
and checks that every output is one the schema's grammar accepts and that Pydantic validates.
The calls are decoded side by side in llama.cpp batches (``LlamaModel.generate_constrained_batch``:
the same decoder walk per call), which is what fits the full run's 7,500 calls into about 22
minutes on two cores; a smaller run goes through the single-call path that the agent uses.
``appliance bench`` is where performance figures live.
"""

from __future__ import annotations

import random

import pytest

from appliance.agent.nodes import (
    error_handler,
    intent_classify,
    result_classify,
    tool_select,
)
from appliance.agent.schemas import (
    LLM_SCHEMAS,
    IntentClassification,
    NextToolSelection,
    ResultAssessment,
    RetryStrategy,
    ToolSelection,
)
from appliance.llm.batch import BatchJob
from appliance.llm.grammar import accepts, min_output_chars, token_budget
from appliance.llm.llama import LlamaModel
from appliance.llm.prompt import Message
from common.locations import models_dir
from mcp_servers.contracts import ARG_SCHEMAS
from models.assemble import assemble_default_model
from models.profiles import get_profile

SCHEMAS = list(LLM_SCHEMAS) + list(ARG_SCHEMAS.values())
# Each schema's token limit in the agent (docs/design.md §7; the property run gives the dictated
# note the same 128 as the other argument calls: its longer agent limit is the same code path).
NODE_BUDGETS = {IntentClassification: intent_classify.MAX_TOKENS, ToolSelection: tool_select.STAGE1_MAX_TOKENS,
                NextToolSelection: tool_select.STAGE1_MAX_TOKENS, ResultAssessment: result_classify.MAX_TOKENS,
                RetryStrategy: error_handler.MAX_TOKENS}
SYSTEMS = [intent_classify.SYSTEM_PROMPT, tool_select.STAGE1_PROMPT, tool_select.STAGE2_PROMPT,
           result_classify.SYSTEM_PROMPT, error_handler.SYSTEM_PROMPT,
           "You are a clinical decision-support assistant. Answer with JSON only.",
           "Extract the requested fields from the clinician's message. Answer with JSON only."]
VERBS = ["Check", "Find", "Prescribe", "Document", "Review", "What about", "Tell me about", "Search for",
         "Please look up", "Can you verify", "Write a note on", "Compare"]
OBJECTS = ["warfarin and aspirin", "patient abc-123", "metformin 500 mg twice daily", "a penicillin allergy with hives",
           "recruiting trials for asthma", "studies on statins in the elderly", "the chart of Maria Garcia", "hello",
           "dofetilide safety", 'a progress note: stable, "quoted" text\nand a newline', "amiodarone + digoxin",
           "HbA1c 8.2% → 7.1% in 3 months", "back\\slash C:\\notes", "the James Wilson born 1961",
           "eGFR 38 mL/min/1.73m² on lisinopril", "pat-004's INR of 3.4", "tab\tseparated\tvalues", "niño con fiebre 39 °C"]
CONTEXTS = ["", "\n\n[Drug Safety Report]\nboxed_warning: torsade de pointes", "\n\nNo results were found.",
            "\n\nThe Patient Record was temporarily unavailable.", "\n\nDetected patient ID: abc-123\nDetected drug name: warfarin"]


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    return LlamaModel(get_profile("gemma3-270m"), assemble_default_model(models_dir()), n_threads=2)


def budget_for(schema) -> int:
    return NODE_BUDGETS.get(schema, tool_select.STAGE2_SEED_MAX_TOKENS)


def jobs_for(schema, n: int, rng: random.Random) -> list[BatchJob]:
    floor = min_output_chars(schema)
    jobs = []
    for i in range(n):
        text = f"{rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(CONTEXTS)}"
        messages = [Message("system", rng.choice(SYSTEMS))]
        if i % 7 == 3:  # some calls carry an earlier exchange
            messages += [Message("user", f"{rng.choice(VERBS)} {rng.choice(OBJECTS)}"), Message("assistant", "Done.")]
        messages.append(Message("user", text))
        # every fifth call at a tighter limit, down to the schema's floor (a schema whose
        # shortest output needs more characters than the node allows tokens keeps the node's)
        budget = budget_for(schema) if i % 5 else rng.randint(min(floor, budget_for(schema)), budget_for(schema))
        jobs.append(BatchJob(messages, schema, 0.0 if i % 2 == 0 else 0.7, budget))
    return jobs


def _hang_guard(samples: int) -> float:
    """Seconds before the batched property run counts as hung: 0.5 s a call, several times what
    two cores need when 16 calls share each llama.cpp step."""
    return 120 + samples * len(SCHEMAS) * 0.5


def pytest_generate_tests(metafunc):
    # ``samples`` comes from --decode-samples; the hang guard scales with it. Six or more per
    # schema give both temperatures at both the node's limit and a tighter one (see jobs_for).
    if "samples" in metafunc.fixturenames:
        n = metafunc.config.getoption("--decode-samples")
        metafunc.parametrize("samples", [pytest.param(n, marks=pytest.mark.timeout(_hang_guard(n)))],
                             ids=[f"{n}x{len(SCHEMAS)}"])


def test_every_fast_output_is_in_the_grammar_language(model, samples):
    rng = random.Random(20261124)
    jobs = [job for schema in SCHEMAS for job in jobs_for(schema, samples, rng)]
    results = model.generate_constrained_batch(jobs, parallel=16)
    failures = []
    per_schema: dict[str, int] = {}
    for job, res in zip(jobs, results):
        name = job.schema.__name__
        if res.error is not None or not accepts(job.schema, res.text) \
                or res.value != job.schema.model_validate_json(res.text):
            failures.append(f"{name}: {res.error!r} {res.text[:200]!r}")
            continue
        assert res.fed_tokens + res.sampled_tokens <= job.max_tokens, (name, res.text)
        per_schema[name] = per_schema.get(name, 0) + 1
    assert not failures, f"{len(failures)} invalid of {len(jobs)}: " + "; ".join(failures[:5])
    assert per_schema == {s.__name__: samples for s in SCHEMAS}
    # With the node's own limit the model decided something in every call (not everything was
    # fed). A tighter limit may leave no room for any decision: every string closed at once and
    # every choice down to its shortest option is a correct output at the schema's floor.
    assert all(r.model_steps > 0 for job, r in zip(jobs, results) if job.max_tokens == budget_for(job.schema))
    assert sum(r.sampled_tokens for r in results) > 0


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.__name__)
def test_single_calls_are_in_the_grammar_language(model, schema):
    # The path every agent node takes (prefix cache, one call at a time), on fewer prompts.
    for job in jobs_for(schema, 6, random.Random(schema.__name__)):
        obj = model.generate_constrained("PROPERTY", job.messages, schema, temperature=job.temperature,
                                         max_tokens=job.max_tokens)
        assert accepts(schema, model.last_text), model.last_text
        assert obj == schema.model_validate_json(model.last_text)
        assert model.last_stats.completion_tokens <= job.max_tokens
        if job.max_tokens == budget_for(schema):
            assert model.last_stats.model_steps > 0


def test_grammar_path_outputs_are_in_the_same_language(model):
    schema = LLM_SCHEMAS[0]
    # llama.cpp's grammar sampler cannot close a string early: give it the longest output's budget
    for job in jobs_for(schema, 3, random.Random(1)):
        model.generate_constrained("X", job.messages, schema, temperature=job.temperature,
                                   max_tokens=token_budget(schema, 256, whole=True), decoder="grammar")
        assert accepts(schema, model.last_text), model.last_text


def test_static_prefix_is_prefilled_once_and_restored_across_nodes(model):
    schema = LLM_SCHEMAS[1]  # ToolSelection: short output
    sys_a = "You route requests. " * 40 + "Answer with JSON only."
    sys_b = "You classify results. " * 40 + "Answer with JSON only."
    model.cache.clear()
    model.generate_constrained("A", [Message("system", sys_a), Message("user", "first question")], schema,
                               temperature=0.0, max_tokens=64)
    first = model.last_stats
    assert not first.cache_hit and first.prefill_tokens == first.prompt_tokens
    model.generate_constrained("B", [Message("system", sys_b), Message("user", "other node")], schema,
                               temperature=0.0, max_tokens=64)
    model.generate_constrained("A", [Message("system", sys_a), Message("user", "a different second question")],
                               schema, temperature=0.0, max_tokens=64)
    again = model.last_stats
    dynamic = again.prompt_tokens - again.static_tokens
    assert again.cache_hit and again.static_tokens > 150
    assert again.prefill_tokens <= dynamic + 1  # only the dynamic part was evaluated
    assert model.cache.snapshot_count == 2


def test_snapshot_memory_is_bounded(model):
    small = LlamaModel(get_profile("gemma3-270m"), assemble_default_model(models_dir()), n_threads=2, snapshot_bytes=1 << 20)
    schema = LLM_SCHEMAS[1]
    for i in range(4):
        system = f"Node {i}. " + "Select a tool. " * 30
        small.generate_constrained("N", [Message("system", system), Message("user", "q")], schema,
                                   temperature=0.0, max_tokens=64)
    assert small.cache.snapshot_count == 1  # each snapshot is over 1 MiB: only the newest is kept
    assert small.cache.snapshot_bytes < 8 << 20
