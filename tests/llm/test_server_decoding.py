"""The fast decoder's walk on a clinic host (appliance.llm.server_decoding) against a stand-in for
llama-server's /completion over the tiny vocabulary of test_fast_decoder: what each request asks
for and what the decoder keeps. The real server's answers: tests/slow/test_model_server.py and
the server rows of tests/slow/test_real_model.py."""

from __future__ import annotations

import re

import pytest

from appliance.llm.fast import BudgetExceeded
from appliance.llm.grammar import accepts, output_schema, string_body_grammar
from appliance.llm.server_decoding import (
    CHOICE_BIAS,
    OffOptions,
    ServerSchemaDecoder,
    ServerSteps,
)
from tests.llm.test_fast_decoder import PIECES, Arr, Note, ScriptedBackend, Small

PROMPT = [7, 8, 9]  # any ids: the stand-in only checks they lead every request


class StandIn:
    """/completion as the decoder uses it. A choice (``logit_bias``) takes the next wish when it
    is among the options, else the lowest option; a string takes wishes (``favourite`` when none
    is left) until a token with a quote, which stops it (the stop word), or ``n_predict``."""

    def __init__(self, wishes: list[str], favourite: str = "a", cut_text: str | None = None):
        self.wishes = list(wishes)
        self.favourite = favourite
        self.cut_text = cut_text  # content the server sends for a cut string (a partial character)
        self.bodies: list[dict] = []

    def post(self, body: dict, cancel) -> dict:
        self.bodies.append(body)
        timings = {"prompt_n": 1, "prompt_ms": 1.0, "predicted_ms": 1.0}
        if "logit_bias" in body:
            allowed = [token for token, bias in body["logit_bias"]]
            assert all(bias == CHOICE_BIAS for _, bias in body["logit_bias"]) and body["n_predict"] == 1
            wish = PIECES.index(self.wishes[0]) if self.wishes else None
            token = self.wishes.pop(0) and wish if wish in allowed else min(allowed)
            return {"tokens": [token], "content": PIECES[token], "stop_type": "limit", "timings": timings}
        tokens, content = [], ""
        # the grammar's most characters: its repeat's bound, plus a first character when it has one
        most = int(re.search(r"\{\d+,(\d+)\}", body["grammar"])[1]) + body["grammar"].count("[") - 1
        while len(tokens) < body["n_predict"]:
            piece = self.wishes.pop(0) if self.wishes else self.favourite
            if len(content) + len(piece.split('"')[0]) > most:
                piece = '"'  # the grammar allows nothing but the quote now
            tokens.append(PIECES.index(piece))
            if '"' in piece:
                return {"tokens": tokens, "content": content + piece.split('"')[0], "stop_type": "word",
                        "timings": timings}
            content += piece
        return {"tokens": tokens, "content": self.cut_text or content, "stop_type": "limit", "timings": timings}


def run(schema, server: StandIn, budget: int | None = None, temperature: float = 0.0):
    steps = ServerSteps(server.post, ScriptedBackend([]).tokenize, lambda token: PIECES[token], list(PROMPT),
                        temperature)
    decoder = ServerSchemaDecoder(steps, temperature, budget=budget)
    return decoder.decode(output_schema(schema)), decoder, steps


def test_fixed_text_is_never_a_request_and_every_request_carries_the_output_so_far():
    server = StandIn(['"bbbb"', 'ab', 'c"', 'null'])
    text, decoder, steps = run(Small, server)
    assert text == '{"kind":"bbbb","text":"abc","maybe":null}' and accepts(Small, text)
    # three model steps, three requests: the enum, the string, the nullable's choice
    assert [("logit_bias" in b, "grammar" in b) for b in server.bodies] == [(True, False), (False, True), (True, False)]
    assert steps.requests == decoder.stats.model_steps == 3
    # each request's prompt is the prompt, then exactly what the decoder has kept so far
    tokenize = ScriptedBackend([]).tokenize
    assert server.bodies[0]["prompt"] == PROMPT + tokenize('{"kind":')
    assert server.bodies[1]["prompt"] == PROMPT + tokenize('{"kind":') + tokenize('"bbbb"') + tokenize(',"text":"')
    # the token that closed the string ('c"') is not kept: its "c" joins the fixed text after it
    after_string = server.bodies[2]["prompt"][len(server.bodies[1]["prompt"]):]
    assert after_string == [PIECES.index("ab")] + tokenize('c","maybe":')
    assert all(b["cache_prompt"] and b["return_tokens"] for b in server.bodies)


def test_a_string_request_asks_for_the_strings_own_grammar_and_stops_at_its_quote():
    server = StandIn(['"aa"', 'c"', 'null'])
    run(Small, server)
    string = server.bodies[1]
    assert string["grammar"] == string_body_grammar(1, 5) and string["stop"] == ['"']
    assert string["n_predict"] == 6  # five characters at most, and the closing token
    assert string["top_k"] == 1 and string["temperature"] == 0.0


def test_sampling_is_the_servers_among_the_options_only():
    server = StandIn([])
    run(Small, server, temperature=0.7)
    choice = server.bodies[0]
    assert choice["temperature"] == 0.7 and choice["top_k"] == len(choice["logit_bias"]) == 2
    assert choice["top_p"] == 1.0 and choice["min_p"] == 0.0


@pytest.mark.parametrize("schema,shortest", [
    (Small, '{"kind":"aa","text":"a","maybe":null}'),
    (Arr, '{"items":["a","a"]}'),
])
def test_a_budget_shorter_than_the_longest_output_still_ends_in_a_whole_object(schema, shortest):
    """As in process: the model never wants to stop, and every budget from the shortest
    output's size up gives an accepted object within the budget."""
    tokenize = ScriptedBackend([]).tokenize
    floor = len(tokenize(shortest))
    for budget in range(floor, floor + 30):
        text, decoder, steps = run(schema, StandIn([]), budget=budget)
        assert accepts(schema, text), (budget, text)
        assert len(steps.tokens) - len(PROMPT) + len(tokenize(decoder.pending)) <= budget, budget


def test_a_budget_too_small_for_a_required_string_is_exceeded_not_broken():
    with pytest.raises(BudgetExceeded):
        run(Small, StandIn([]), budget=6)


def test_a_string_cut_inside_a_character_keeps_whole_characters_as_text():
    server = StandIn(['"aa"'], favourite="a", cut_text="aa\ufffd")
    text, decoder, steps = run(Note, server, budget=5)
    assert accepts(Note, text) and "\ufffd" not in text and decoder.stats.closed_early == 1


def test_a_model_that_closes_at_once_is_one_step_and_no_sampled_token():
    text, decoder, steps = run(Note, StandIn(['"']))
    assert text == '{"text":""}'
    assert decoder.stats.sampled_tokens == 0 and decoder.stats.model_steps == 1 == steps.requests


def test_an_answer_outside_the_options_is_refused():
    class Wrong(StandIn):
        def post(self, body, cancel):
            answer = super().post(body, cancel)
            return {**answer, "tokens": [PIECES.index("x")]} if "logit_bias" in body else answer

    with pytest.raises(OffOptions, match="among 2 options"):
        run(Small, Wrong([]))
