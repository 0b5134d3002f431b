"""Grounding on the shipped small model (never a download): the plumbing is real (extraction and
evaluation through the fast decoder, searches on the starter UMLS database), the answers are a
base model's. What must hold whatever it answers: every constrained call parses, every entity's
words are the input's at its span, and each has a method and a confidence in [0, 1]."""

from __future__ import annotations

import json
import random

import pytest

from appliance.cli import main
from appliance.grounding import InProcessSearch, ground
from appliance.grounding.loop import EVALUATE_MAX_TOKENS, EXTRACT_MAX_TOKENS
from appliance.grounding.prompts import evaluate_messages, extract_messages
from appliance.grounding.schemas import Extraction, evaluation_schema
from appliance.llm.batch import BatchJob
from appliance.llm.grammar import accepts, min_output_chars
from appliance.llm.llama import LlamaModel
from common.locations import models_dir
from mcp_servers.umls.grounding import METHODS
from mcp_servers.umls.store import ensure_database
from models.assemble import assemble_default_model
from models.profiles import get_profile

DONE_WHEN = "Patients taking acetaminophen for osteoarthritis; no heparin in the last 30 days"
CRITERION = "Pregnant or breastfeeding women, or a history of myocardial infarction within 6 months"


def _check(text: str, data: dict) -> None:
    assert data["stats"]["extraction_calls"] == 1 and data["stats"]["parse_failures"] == 0
    assert data["stats"]["model_calls"] == 1 + data["stats"]["evaluate_calls"]
    for e in data["entities"]:
        assert text[e["span"][0]:e["span"][1]] == e["text"]
        assert e["method"] in METHODS and 0.0 <= e["confidence"] <= 1.0
        assert (e["cui"] is None) == (e["method"] == "expert_review")


def test_the_done_when_command_on_the_shipped_model(appliance_home, capsys):
    assemble_default_model(models_dir())
    assert main(["ground", DONE_WHEN, "--json"]) == 0
    _check(DONE_WHEN, json.loads(capsys.readouterr().out))


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    profile = get_profile("gemma3-270m")
    return LlamaModel(profile, assemble_default_model(models_dir()), n_threads=2)


def test_ground_one_criterion_through_the_api(model, tmp_path):
    db = tmp_path / "umls.sqlite"
    ensure_database(db)
    with InProcessSearch(db) as search:
        result = ground(CRITERION, model, search)
    _check(CRITERION, result.to_json())


TEXTS = [DONE_WHEN, CRITERION, "Weight >=5Kg", "HbA1c 7.5-10% on metformin >= 1500 mg/day", "ECOG 0-1",
         "Known HER2-positive or BRCA1/2 mutated breast cancer", "niño con fiebre 39 °C", 'quoted "text" \\ slash']
CANDIDATES = [{"cui": f"C000000{i}", "name": name, "snomed_code": str(100 + i), "semantic_type": "Finding",
               "matched_term": name, "match_type": "word", "score": 0.6}
              for i, name in enumerate(["Diabetes mellitus", "Acetaminophen", "Pregnancy", "Kidney failure", "Heparin"])]


@pytest.mark.heavy
def test_grounding_schemas_decode_into_their_grammar_language(model):
    """Extraction and every evaluation schema, greedy and sampled, at the loop's limits and
    tighter ones (lists of objects and one-value enums are what these add to the decoder)."""
    rng = random.Random(16)
    jobs = []
    for i in range(24):
        text = rng.choice(TEXTS)
        if i % 2:
            k = 1 + i % 5
            schema, limit = evaluation_schema(k), EVALUATE_MAX_TOKENS
            messages = evaluate_messages(text, text[:20], "Condition", [text[:15]], CANDIDATES[:k], 1 + i % 3, 3)
        else:
            schema, limit = Extraction, EXTRACT_MAX_TOKENS
            messages = extract_messages(text)
        budget = limit if i % 3 else rng.randint(min_output_chars(schema), limit)
        jobs.append(BatchJob(messages, schema, 0.0 if i % 4 < 2 else 0.7, budget))
    results = model.generate_constrained_batch(jobs, parallel=8)
    for job, res in zip(jobs, results):
        assert res.error is None and accepts(job.schema, res.text), (job.schema.__name__, res.error, res.text[:200])
        assert res.value == job.schema.model_validate_json(res.text)
        assert res.fed_tokens + res.sampled_tokens <= job.max_tokens
