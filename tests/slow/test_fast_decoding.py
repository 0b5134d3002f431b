"""The fast decoder and prefix reuse on the real small model.

The property test runs APPLIANCE_PROPERTY_SAMPLES varied prompts per schema (default 16, so CI
stays within budget); ``appliance bench`` is where performance figures live.
"""

from __future__ import annotations

import itertools
import os

import pytest

from appliance.agent.nodes.common import token_budget
from appliance.agent.schemas import LLM_SCHEMAS
from appliance.llm.grammar import accepts, max_output_chars
from appliance.llm.llama import LlamaModel
from appliance.llm.prompt import Message
from mcp_servers.contracts import ARG_SCHEMAS
from models.assemble import assemble_default_model
from models.profiles import get_profile

SAMPLES = int(os.environ.get("APPLIANCE_PROPERTY_SAMPLES", "16"))
SYSTEMS = [
    "You are a clinical decision-support assistant. Answer with JSON only.",
    "Extract the requested fields from the clinician's message. Answer with JSON only.",
]
VERBS = ["Check", "Find", "Prescribe", "Document", "Review", "What about", "Tell me", "Search"]
OBJECTS = ["warfarin and aspirin", "patient abc-123", "metformin 500 mg twice daily", "a penicillin allergy",
           "trials for asthma", "studies on statins", "the chart of Maria Garcia", "hello", "dofetilide safety",
           "a progress note: stable, \"quoted\" text\nand a newline"]


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    return LlamaModel(get_profile("gemma3-270m"), assemble_default_model(), n_threads=2)


def prompts(n: int):
    combos = itertools.cycle(itertools.product(SYSTEMS, VERBS, OBJECTS))
    for i, (system, verb, obj) in zip(range(n), combos):
        yield [Message("system", system), Message("user", f"{verb} {obj} (case {i})")], (0.0 if i % 2 == 0 else 0.7)


def _hang_guard(schema) -> float:
    """Seconds before the property test of ``schema`` counts as hung: the schema's longest
    output at one character per token and 10 tokens a second (several times slower than a
    2-core laptop), per sample. The base model often runs a free string to its limit, one
    character per token (ClinicalNoteArgs: ~1,500 tokens, ~24 s a call here)."""
    return 60 + SAMPLES * (2 + max_output_chars(schema) / 10)


@pytest.mark.parametrize("schema", [
    pytest.param(schema, id=schema.__name__, marks=pytest.mark.timeout(_hang_guard(schema)))
    for schema in list(LLM_SCHEMAS) + list(ARG_SCHEMAS.values())
])
def test_every_fast_output_is_in_the_grammar_language(model, schema):
    budget = token_budget(schema, 64)
    for messages, temperature in prompts(SAMPLES):
        obj = model.generate_constrained("PROPERTY", messages, schema, temperature=temperature, max_tokens=budget)
        assert accepts(schema, model.last_text), model.last_text
        assert isinstance(obj, schema)


def test_grammar_path_outputs_are_in_the_same_language(model):
    schema = LLM_SCHEMAS[0]
    for messages, temperature in prompts(3):
        model.generate_constrained("X", messages, schema, temperature=temperature,
                                   max_tokens=token_budget(schema, 256), decoder="grammar")
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
    small = LlamaModel(get_profile("gemma3-270m"), assemble_default_model(), n_threads=2, snapshot_bytes=1 << 20)
    schema = LLM_SCHEMAS[1]
    for i in range(4):
        system = f"Node {i}. " + "Select a tool. " * 30
        small.generate_constrained("N", [Message("system", system), Message("user", "q")], schema,
                                   temperature=0.0, max_tokens=64)
    assert small.cache.snapshot_count == 1  # each snapshot is over 1 MiB: only the newest is kept
    assert small.cache.snapshot_bytes < 8 << 20
