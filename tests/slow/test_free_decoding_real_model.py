"""Free text in process on the shipped model: the same greedy words as the clinic host, each one
the argmax of its step, and sampled tokens only from the set llama-server would sample from."""

from __future__ import annotations

import math

import llama_cpp
import numpy as np
import pytest

from appliance.llm import free
from appliance.llm.llama import LlamaModel
from appliance.llm.prompt import Message, split_parts
from common.locations import models_dir
from models.assemble import assemble_default_model
from models.profiles import get_profile

PROMPTS = [
    [Message("user", "What is hypertension?")],
    [Message("system", "You are a clinical assistant. Answer briefly."),
     Message("user", "Summarise: warfarin 5 mg daily, INR 2.4, no bleeding. Next steps?")],
    # greedy text in process drifted from the host's on this one while attention differed
    [Message("user", "Write a discharge summary for patient 3.")],
]
TOKENS = 96


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    return LlamaModel(get_profile("gemma3-270m"), assemble_default_model(models_dir()), n_threads=2)


def test_greedy_free_text_is_the_hosts_word_for_word(model, tmp_path):
    from appliance.llm.server import ServerModel
    from tests.slow import model_server

    local = [model.generate_free("SYNTHESIZE", p, temperature=0.0, max_tokens=TOKENS) for p in PROMPTS]
    with model_server.running(tmp_path / "server.log", slots=1) as url:
        host = ServerModel(url)
        remote = [host.generate_free("SYNTHESIZE", p, temperature=0.0, max_tokens=TOKENS) for p in PROMPTS]
    assert all(len(text) > 40 for text in local)
    assert local == remote


def _argmax_loop(model: LlamaModel, messages: list[Message], max_tokens: int) -> str:
    """Greedy decoding written out step by step: argmax, stop at end-of-generation, feed."""
    raw = b""
    with model._lock:
        model.cache.clear()
        model.cache.prime(*split_parts(messages), reserve=max_tokens)
        for _ in range(max_tokens):
            token = int(np.argmax(model._backend.logits()))
            if model._is_eog(token):
                break
            model._backend.feed([token])
            raw += model.table.raw[token]
    return raw.decode("utf-8", errors="replace")


def test_greedy_free_text_is_the_argmax_of_every_step(model):
    for messages in PROMPTS:
        with model._lock:
            model.cache.clear()  # both decodes evaluate the prompt the same way, from nothing
        text = model.generate_free("SYNTHESIZE", messages, temperature=0.0, max_tokens=TOKENS)
        assert text == _argmax_loop(model, messages, TOKENS)


def _allowed(logits: np.ndarray) -> set[int]:
    """llama-server's candidates before its draw: top-k, then top-p over their softmax, then
    min-p relative to the most likely (the temperature comes after and cuts nothing)."""
    top = np.argsort(-logits.astype(np.float64))[:free.TOP_K]
    scores = logits[top].astype(np.float64)
    probs = np.exp(scores - scores[0])
    probs /= probs.sum()
    keep = int(np.searchsorted(np.cumsum(probs), free.TOP_P) + 1)
    kept = [int(t) for t, s in zip(top[:keep], scores[:keep]) if s >= scores[0] + math.log(free.MIN_P)]
    return set(kept)


def test_sampled_tokens_come_only_from_the_hosts_candidates(model):
    messages = [Message("user", "Name one common chronic disease.")]
    with model._lock:
        model.cache.prime(*split_parts(messages), reserve=8)
        logits = model._backend.logits().copy()
        allowed = _allowed(logits)
        with free.FreeSampler(llama_cpp, model.cache.ctx, model._backend.logits, 1.0, seed=7) as sampler:
            drawn = [sampler.sample() for _ in range(300)]
        with free.FreeSampler(llama_cpp, model.cache.ctx, model._backend.logits, 1.0, seed=7) as again:
            repeated = [again.sample() for _ in range(300)]
        with free.FreeSampler(llama_cpp, model.cache.ctx, model._backend.logits, 0.0, seed=7) as greedy:
            first = greedy.sample()
    assert set(drawn) <= allowed
    assert len(allowed) == 1 or len(set(drawn)) > 1  # a draw, not the argmax every time
    assert drawn == repeated  # the seed decides the draws
    assert first == int(np.argmax(logits))
