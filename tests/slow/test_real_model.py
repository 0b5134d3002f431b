"""The real runtimes with the shipped small GGUF (never a download): the backend contract.

Each test that takes ``model`` runs twice: on llama.cpp in this process (``LlamaModel``) and on
llama.cpp's own server started by the test (``ServerModel``, what terminals of a clinic host
use). Every constrained node call must return a schema-valid object: 100% over a spread of
inputs (>= 50 calls), through the nodes' own prompt builders.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from pydantic import BaseModel, Field

from appliance.agent.nodes import (
    error_handler,
    intent_classify,
    result_classify,
    tool_select,
)
from appliance.agent.nodes.router import Limits
from appliance.agent.reading.request import extract_entities
from appliance.agent.schemas import LLM_SCHEMAS
from appliance.agent.state import AgentState, ToolResult
from appliance.llm.llama import LlamaModel
from appliance.medication.names import DrugRecogniser
from common.locations import models_dir
from mcp_servers.contracts import ARG_SCHEMAS, TOOL_LABELS
from models.assemble import assemble_default_model
from models.profiles import get_profile

DRUGS = DrugRecogniser(["dofetilide", "warfarin", "aspirin", "ibuprofen", "metformin", "amoxicillin", "lisinopril"])

QUERIES = [
    "Hello",
    "What is hypertension?",
    "Check FDA warnings for dofetilide",
    "Find patient John Smith and check his meds",
    "Check interactions between warfarin and aspirin",
    "Check amoxicillin info for my patient",
    "Write a note for patient abc-123: stable, continue current plan",
    "Prescribe metformin 500mg twice daily for abc-123",
    "Are there recruiting trials for mesothelioma?",
    "Find studies on SGLT2 inhibitors in heart failure",
    "Document a penicillin allergy with hives for pat-004",
    "Thanks, that is all",
]


@pytest.fixture(scope="module", params=["in_process", pytest.param("server", marks=pytest.mark.heavy)])
def model(request, tmp_path_factory):
    if request.param == "in_process":
        profile = get_profile("gemma3-270m")
        yield LlamaModel(profile, assemble_default_model(models_dir()), n_threads=2)
        return
    from appliance.llm.server import ServerModel
    from tests.slow import model_server

    with model_server.running(tmp_path_factory.mktemp("llama-server") / "server.log") as url:
        yield ServerModel(url)


def _state(query: str, **kw) -> AgentState:
    return AgentState(user_query=query, extracted_entities=extract_entities(query, DRUGS), **kw)


def test_llama_cpp_accepts_every_grammar_in_a_subprocess():
    code = textwrap.dedent("""
        from llama_cpp import LlamaGrammar
        from appliance.agent.schemas import LLM_SCHEMAS
        from appliance.llm.grammar import grammar_for
        from mcp_servers.contracts import ARG_SCHEMAS
        for schema in list(LLM_SCHEMAS) + list(ARG_SCHEMAS.values()):
            LlamaGrammar.from_string(grammar_for(schema), verbose=False)
        print("ok", len(LLM_SCHEMAS) + len(ARG_SCHEMAS))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == f"ok {len(LLM_SCHEMAS) + len(ARG_SCHEMAS)}"


def test_every_constrained_node_call_is_schema_valid(model):
    calls = 0
    # INTENT_CLASSIFY: 12 calls
    for q in QUERIES:
        done = intent_classify.run(_state(q), model)
        update = done.update
        assert update["intent"] in ("DIRECT", "TOOL_NEEDED")
        calls += 1
    # TOOL_SELECT stage 1 + stage 2: 2 calls each, 10 queries
    for q in QUERIES[2:]:
        done = tool_select.run(_state(q, task_summary="Clinician request.", suggested_tool=None), model)
        update = done.update
        tool = update["current_tool"]
        assert tool in ARG_SCHEMAS
        ARG_SCHEMAS[tool].model_validate(update["current_args"])
        calls += 2
    # TOOL_SELECT stage 2 for every tool, directly: 10 calls
    for tool in ARG_SCHEMAS:
        st = _state(QUERIES[6], task_summary="Clinician request.", current_tool=tool,
                    current_args={}, retry_mode="retry_different_args")
        done = tool_select.run(st, model)
        update = done.update
        ARG_SCHEMAS[tool].model_validate(update["current_args"])
        calls += 1
    # RESULT_CLASSIFY: 8 calls over good, empty and failed results
    samples = [
        ("check_drug_safety", "[Drug Safety Report]\nboxed_warning: torsade de pointes", None),
        ("search_medical_literature", "No results were found for xyz in the Medical Literature.", "not_found"),
        ("check_drug_safety", "The Drug Safety Report was temporarily unavailable.", "timeout"),
        ("search_patient", "[Patient Search]\ntotal_matches: 1\nmatches:\n- name: John Smith", None),
        ("get_patient_chart", "[Patient Record]\nproblems:\n- Type 2 diabetes\n- CKD stage 3", None),
        ("find_clinical_trials", "[Clinical Trials]\ntrials:\n- NCT01234567 recruiting", None),
        ("prescribe_medication", "The clinician did not approve the Prescription; nothing was written.", "rejected_by_user"),
        ("check_drug_interactions", "[Drug Interaction Check]\ninteractions:\n- warfarin + aspirin: major", None),
    ]
    for tool, text, etype in samples:
        result = ToolResult(tool, TOOL_LABELS[tool], {}, None if etype else {"x": 1}, text,
                            error=text if etype else None, error_type=etype)
        st = _state(QUERIES[2], task_summary="Safety lookup.", tool_results=(result,))
        done = result_classify.run(st, model)
        update = done.update
        assert update["last_result_classification"] in (
            "success_rich", "success_partial", "no_results", "error_retryable", "error_fatal")
        calls += 1
    # ERROR_HANDLER's model decision: 6 calls
    for tool, text, etype in [s for s in samples if s[2] and s[2] != "rejected_by_user"] * 3:
        result = ToolResult(tool, TOOL_LABELS[tool], {}, None, text, error=text, error_type=etype)
        st = _state(QUERIES[2], tool_results=(result,), last_result_classification="error_retryable")
        done = error_handler.run(st, model, Limits())
        update, nxt = done.update, done.next
        assert update["retry_mode"] in ("retry_same", "retry_different_args") and nxt == "TOOL_SELECT"
        calls += 1
    assert calls >= 50


def test_free_generation_streams_and_can_be_cancelled(model):
    import threading

    from appliance.errors import GenerationCancelled
    from appliance.llm.prompt import Message

    pieces: list[str] = []
    text = model.generate_free("SYNTHESIZE", [Message("user", "Define hypertension.")], temperature=0.5,
                               max_tokens=24, on_token=pieces.append)
    assert "".join(pieces) == text and model.last_stats.completion_tokens >= 1
    cancel = threading.Event()

    def stop_after_three(piece: str) -> None:
        if len(seen) >= 2:
            cancel.set()
        seen.append(piece)

    seen: list[str] = []
    with pytest.raises(GenerationCancelled):
        model.generate_free("SYNTHESIZE", [Message("user", "Define asthma in detail.")], temperature=0.0,
                            max_tokens=64, on_token=stop_after_three, cancel=cancel)
    assert 3 <= len(seen) < 64


def test_loading_the_model_prints_nothing_into_the_terminal():
    code = textwrap.dedent("""
        from appliance.llm.llama import LlamaModel
        from common.locations import models_dir
        from models.assemble import assemble_default_model
        from models.profiles import get_profile
        LlamaModel(get_profile("gemma3-270m"), assemble_default_model(models_dir()), n_threads=2)
        print("loaded")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "loaded"
    assert proc.stderr == ""


def test_a_constrained_call_is_cancelled_at_its_next_token_and_the_model_stays_usable(model):
    import threading

    from appliance.agent.schemas import IntentClassification
    from appliance.errors import GenerationCancelled
    from appliance.llm.prompt import Message

    messages = [Message("system", "Classify the request. Answer with JSON only."), Message("user", "Define asthma.")]
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(GenerationCancelled):
        model.generate_constrained("INTENT_CLASSIFY", messages, IntentClassification, temperature=0.0,
                                   max_tokens=256, cancel=cancel)
    out = model.generate_constrained("INTENT_CLASSIFY", messages, IntentClassification, temperature=0.0, max_tokens=256)
    assert out.intent in ("DIRECT", "TOOL_NEEDED")


def test_a_budget_below_the_longest_output_still_gives_a_valid_object(model):
    """The fast decoder (in process, and its walk on the server) closes strings to fit the
    budget. The server's grammar decoder keeps back what the longest ending takes (at most half
    the budget) and ends a cut output by a second, short request (appliance.llm.closing): always
    an object, never half."""
    from appliance.agent.schemas import ResultAssessment
    from appliance.llm.closing import closing_reserve
    from appliance.llm.grammar import accepts
    from appliance.llm.prompt import Message

    messages = [Message("system", "Summarise at great length. Answer with JSON only."),
                Message("user", "Describe every finding of a long chart in detail.")]
    reserve = closing_reserve(ResultAssessment)
    decoders = ["fast"] if isinstance(model, LlamaModel) else ["fast", "grammar"]
    for decoder in decoders:
        closed = []
        for budget in (24, 40, 64, 96):
            out = model.generate_constrained("RESULT_CLASSIFY", messages, ResultAssessment, temperature=0.0,
                                             max_tokens=budget, decoder=decoder)
            assert accepts(ResultAssessment, model.last_text) and out.brief_summary
            cost = budget if decoder == "fast" else max(budget, budget // 2 + reserve)
            assert model.last_stats.completion_tokens <= cost, (decoder, budget, model.last_stats)
            closed.append(model.last_stats.closed_early)
        assert closed[0] >= 1, f"24 tokens cut the summary: the {decoder} decoder ended it"


class FreeDict(BaseModel):
    extra: dict


class Defaulted(BaseModel):
    kind: str = "x"


class Patterned(BaseModel):
    code: str = Field(pattern=r"^[A-Z]\d+$", max_length=8)


@pytest.mark.parametrize("schema", [FreeDict, Defaulted, Patterned], ids=lambda s: s.__name__)
@pytest.mark.parametrize("decoder", ["fast", "grammar"])
def test_a_schema_without_a_safe_grammar_is_refused_clearly_by_either_decoder(model, schema, decoder):
    from appliance.errors import SchemaNotSupported
    from appliance.llm.prompt import Message

    with pytest.raises(SchemaNotSupported):
        model.generate_constrained("X", [Message("user", "hello")], schema, temperature=0.0, max_tokens=32,
                                   decoder=decoder)
