"""Fitting a prompt to the context by rule (appliance.llm.fit), with a character count standing
in for the tokenizer; tests/slow/test_prompt_limits.py runs the same rule on the real model."""

from __future__ import annotations

import pytest

from appliance.errors import ContextOverflow
from appliance.llm.fit import SHORTENED, fit_messages
from appliance.llm.prompt import Message, render_gemma


def count(messages) -> int:
    return len(render_gemma(messages))


QUESTION = "Clinician's question: what is her latest creatinine?"


def _messages(history_pairs: int, result: str = "") -> list[Message]:
    messages = [Message("system", "SYSTEM")]
    for i in range(history_pairs):
        messages += [Message("user", f"old question {i} " + "x" * 200), Message("assistant", f"old answer {i}")]
    content = QUESTION + (f"\n\nInformation found:\n{result}" if result else "")
    messages.append(Message("user", content, shortenable=(result,) if result else ()))
    return messages


def test_a_prompt_that_fits_is_left_alone():
    messages = _messages(2)
    fitted = fit_messages(messages, count, 10_000)
    assert fitted.messages == messages and not fitted.trimmed


def test_history_goes_first_oldest_exchange_first():
    messages = _messages(4)
    limit = count(messages) - 100  # one exchange must go
    fitted = fit_messages(messages, count, limit)
    assert fitted.history_dropped == 2 and fitted.results_shortened == 0
    texts = [m.content for m in fitted.messages]
    assert not any(t.startswith("old question 0") for t in texts)
    assert any(t.startswith("old question 1") for t in texts)
    assert fitted.messages[-1].content == QUESTION
    assert fitted.tokens <= limit


def test_then_long_results_are_shortened_with_a_marker_never_the_question():
    result = "[Patient Record]\n" + "\n".join(f"  line {i}: " + "v" * 60 for i in range(200))
    messages = _messages(3, result)
    limit = count(_messages(0)) + 1500
    fitted = fit_messages(messages, count, limit)
    assert fitted.history_dropped == 6 and fitted.results_shortened >= 1
    last = fitted.messages[-1].content
    assert last.startswith(QUESTION) and SHORTENED in last
    assert last.split("Information found:\n")[1].startswith("[Patient Record]\n  line 0:")
    assert fitted.tokens <= limit


def test_a_question_that_cannot_fit_is_refused_clearly():
    messages = [Message("system", "S"), Message("user", "q" * 5000)]
    with pytest.raises(ContextOverflow, match="too long for the model"):
        fit_messages(messages, count, 1000)
