"""The in-process free-text loop (``appliance.llm.free.decode``) over a scripted token stream:
what it streams, where it stops, and what it counts. The real sampler is in
tests/slow/test_free_decoding_real_model.py."""

from __future__ import annotations

import threading

from appliance.llm.free import decode

EOG = 0
RAW = [b"", b"Hello", b" wor", b"ld", "é".encode()[:1], "é".encode()[1:], b"!"]


class Scripted:
    """Yields the given tokens in order, as ``FreeSampler.sample`` would."""

    def __init__(self, tokens: list[int]):
        self.tokens = list(tokens)

    def sample(self) -> int:
        return self.tokens.pop(0)


def _run(tokens, max_tokens=16, **kw):
    fed: list[int] = []
    streamed: list[str] = []
    out = decode(Scripted(tokens), fed.extend, RAW, lambda t: t == EOG, max_tokens, on_token=streamed.append, **kw)
    return out, fed, streamed


def test_tokens_are_fed_back_and_streamed_until_end_of_generation():
    out, fed, streamed = _run([1, 2, 3, 6, EOG, 1])
    assert "".join(out.pieces) == "Hello world!" == "".join(streamed)
    assert fed == [1, 2, 3, 6]  # the end-of-generation token is never fed
    assert (out.finish, out.sampled, out.completion_tokens) == ("stop", 5, 4)


def test_a_character_split_across_two_tokens_is_streamed_whole():
    out, _, streamed = _run([1, 4, 5, EOG])
    assert streamed == ["Hello", "é"]
    assert "".join(out.pieces) == "Helloé"


def test_a_character_cut_by_the_limit_is_closed_with_a_replacement_not_lost():
    out, fed, streamed = _run([1, 4], max_tokens=2)
    assert streamed == ["Hello"] and "".join(out.pieces) == "Hello\ufffd"
    assert (out.finish, out.completion_tokens, fed) == ("length", 2, [1, 4])


def test_the_limit_and_ignore_eog():
    out, fed, _ = _run([1, EOG, 2, EOG], max_tokens=3, ignore_eog=True)
    assert fed == [1, EOG, 2] and (out.finish, out.completion_tokens) == ("length", 3)


def test_cancel_is_checked_before_every_token():
    cancel = threading.Event()
    fed: list[int] = []

    def on_token(text: str) -> None:
        if len(fed) == 2:
            cancel.set()

    out = decode(Scripted([1, 2, 3, 6]), fed.extend, RAW, lambda t: t == EOG, 16, on_token=on_token, cancel=cancel)
    assert out.finish == "cancelled" and fed == [1, 2] and "".join(out.pieces) == "Hello wor"
