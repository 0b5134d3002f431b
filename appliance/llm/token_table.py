"""What the fast decoder knows of a model's vocabulary (``TokenTable``), computed once per model:
each token's text and exact bytes, whether it may sit inside a JSON string, and how it could
close one.

Invariants:
- A token is ``safe`` when its text is non-empty and holds no quote, backslash or control
  character; a piece that is not whole UTF-8 on its own has empty text and is never safe (its
  ``raw`` bytes still stream free text across multi-byte characters).
- ``quote_prefix`` is the text before a token's first quote when that text is safe (None
  otherwise); ``closers`` are the tokens whose text starts with the quote.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

_UNSAFE = {ord('"'), ord("\\")} | set(range(0x20)) | {0x7F}


@dataclass
class TokenTable:
    """Per-vocabulary facts the decoder needs, computed once per model."""

    pieces: list[str]
    raw: list[bytes]  # exact bytes, for free-text streaming across multi-byte characters
    safe: np.ndarray  # non-empty text with no quote, backslash or control character
    quote_prefix: list[str | None]  # text before the first quote, when that text is safe
    lengths: np.ndarray  # characters in the piece
    leading_space: np.ndarray
    closers: np.ndarray  # tokens whose text starts with the closing quote

    @classmethod
    def build(cls, llama_cpp, vocab, n_vocab: int) -> TokenTable:
        buf = ctypes.create_string_buffer(256)
        pieces: list[str] = []
        raws: list[bytes] = []
        safe = np.zeros(n_vocab, dtype=bool)
        lengths = np.zeros(n_vocab, dtype=np.int32)
        leading = np.zeros(n_vocab, dtype=bool)
        quote_prefix: list[str | None] = [None] * n_vocab
        for i in range(n_vocab):
            k = llama_cpp.llama_token_to_piece(vocab, i, buf, 256, 0, False)
            raw = buf.raw[:k] if k > 0 else b""
            raws.append(raw)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = ""  # a partial multi-byte piece is never taken inside a string
            pieces.append(text)
            lengths[i] = len(text)
            if not text:
                continue
            leading[i] = text[0].isspace()
            codes = {ord(c) for c in text}
            if not codes & _UNSAFE:
                safe[i] = True
            elif '"' in text:
                before = text.split('"', 1)[0]
                if not {ord(c) for c in before} & _UNSAFE:
                    quote_prefix[i] = before
        closers = np.array([i for i, q in enumerate(quote_prefix) if q == ""], dtype=np.int64)
        return cls(pieces, raws, safe, quote_prefix, lengths, leading, closers)
