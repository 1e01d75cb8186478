"""Malformed usage raises UsageParseError with a stable code and the JSON pointer."""

from __future__ import annotations

from typing import Any

import pytest

from stableprompt import InputError, UsageParseError
from stableprompt.providers import parse_response, parse_stream, parse_usage, stream_accumulator

# (wire format, usage object, code, pointer)
BAD_USAGE: list[tuple[str, Any, str, str]] = [
    ("anthropic", {"output_tokens": 3}, "usage-missing", "/input_tokens"),
    ("anthropic", {"input_tokens": None}, "usage-missing", "/input_tokens"),
    ("anthropic", {"input_tokens": -1}, "usage-negative", "/input_tokens"),
    ("anthropic", {"input_tokens": "21"}, "usage-type", "/input_tokens"),
    ("anthropic", {"input_tokens": 21.0}, "usage-type", "/input_tokens"),
    ("anthropic", {"input_tokens": True}, "usage-type", "/input_tokens"),
    (
        "anthropic",
        {"input_tokens": 1, "cache_read_input_tokens": -5},
        "usage-negative",
        "/cache_read_input_tokens",
    ),
    ("anthropic", {"input_tokens": 1, "cache_creation": []}, "usage-type", "/cache_creation"),
    (
        "anthropic",
        {"input_tokens": 1, "cache_creation": {"ephemeral_5m_input_tokens": 1}},
        "usage-missing",
        "/cache_creation/ephemeral_1h_input_tokens",
    ),
    ("anthropic", [1, 2], "usage-type", ""),
    ("anthropic", None, "usage-type", ""),
    ("openai-chat", {"completion_tokens": 1}, "usage-missing", "/prompt_tokens"),
    (
        "openai-chat",
        {"prompt_tokens": 10, "prompt_tokens_details": 5},
        "usage-type",
        "/prompt_tokens_details",
    ),
    (
        "openai-chat",
        {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": "4"}},
        "usage-type",
        "/prompt_tokens_details/cached_tokens",
    ),
    (
        "openai-chat",
        {"prompt_tokens": 10, "prompt_tokens_details": {"cache_write_tokens": -1}},
        "usage-negative",
        "/prompt_tokens_details/cache_write_tokens",
    ),
    ("openai-responses", {"input_tokens_details": {}}, "usage-missing", "/input_tokens"),
    (
        "openai-responses",
        {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 1.5}},
        "usage-type",
        "/input_tokens_details/cached_tokens",
    ),
    (
        "openai-responses",
        {
            "input_tokens": 5,
            "input_tokens_details": {"cache_write_tokens_details": {"ttl_30m_tokens": -2}},
        },
        "usage-negative",
        "/input_tokens_details/cache_write_tokens_details/ttl_30m_tokens",
    ),
    ("gemini", {"cachedContentTokenCount": 5}, "usage-missing", "/promptTokenCount"),
    (
        "gemini",
        {"promptTokenCount": 10, "cachedContentTokenCount": -1},
        "usage-negative",
        "/cachedContentTokenCount",
    ),
    ("deepseek", {"prompt_cache_hit_tokens": 5}, "usage-missing", "/prompt_tokens"),
    (
        "deepseek",
        {"prompt_tokens": 5, "prompt_cache_miss_tokens": "x"},
        "usage-type",
        "/prompt_cache_miss_tokens",
    ),
    ("bedrock-converse", {"outputTokens": 5}, "usage-missing", "/inputTokens"),
    ("bedrock-converse", {"inputTokens": 5, "cacheDetails": {}}, "usage-type", "/cacheDetails"),
    (
        "bedrock-converse",
        {"inputTokens": 5, "cacheDetails": [{"ttl": "5m"}]},
        "usage-missing",
        "/cacheDetails/0/inputTokens",
    ),
    (
        "bedrock-converse",
        {"inputTokens": 5, "cacheDetails": [{"inputTokens": 1}]},
        "usage-missing",
        "/cacheDetails/0/ttl",
    ),
    (
        "bedrock-converse",
        {"inputTokens": 5, "cacheDetails": [{"ttl": 5, "inputTokens": 1}]},
        "usage-type",
        "/cacheDetails/0/ttl",
    ),
    (
        "openai-compatible",
        {"prompt_tokens": 5, "cached_tokens": -3},
        "usage-negative",
        "/cached_tokens",
    ),
    ("llama-cpp", {"usage": None, "timings": None}, "usage-missing", "/usage"),
    ("llama-cpp", {"timings": {"cache_n": 5}}, "usage-missing", "/timings/prompt_n"),
    ("llama-cpp", {"timings": {"prompt_n": 5}}, "usage-missing", "/timings/cache_n"),
    ("llama-cpp", {"usage": {"completion_tokens": 1}}, "usage-missing", "/usage/prompt_tokens"),
    (
        "llama-cpp",
        {"usage": {"prompt_tokens": 5}, "timings": {"cache_n": -1}},
        "usage-negative",
        "/timings/cache_n",
    ),
    ("llama-cpp", {"usage": [], "timings": {}}, "usage-type", "/usage"),
]


@pytest.mark.parametrize(("wire_format", "usage", "code", "pointer"), BAD_USAGE)
def test_bad_usage_names_code_and_pointer(
    wire_format: str, usage: Any, code: str, pointer: str
) -> None:
    """Missing, negative and wrongly typed fields raise with the field's JSON pointer."""
    with pytest.raises(UsageParseError) as info:
        parse_usage(wire_format, usage)
    assert info.value.code == code
    assert info.value.pointer == pointer
    assert isinstance(info.value, InputError)
    assert isinstance(info.value, ValueError)
    assert code in str(info.value)


@pytest.mark.parametrize(
    ("wire_format", "body", "code", "pointer"),
    [
        (
            "anthropic",
            {"type": "error", "error": {"type": "overloaded_error"}},
            "usage-missing",
            "/usage",
        ),
        ("anthropic", {"usage": {"input_tokens": -1}}, "usage-negative", "/usage/input_tokens"),
        (
            "openai-chat",
            {"usage": {"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": "1"}}},
            "usage-type",
            "/usage/prompt_tokens_details/cached_tokens",
        ),
        ("openai-responses", {"usage": None}, "usage-missing", "/usage"),
        ("gemini", {"candidates": []}, "usage-missing", "/usageMetadata"),
        ("gemini", [{"candidates": []}], "usage-missing", "/0/usageMetadata"),
        (
            "gemini",
            [{"usageMetadata": {"promptTokenCount": -1}}],
            "usage-negative",
            "/0/usageMetadata/promptTokenCount",
        ),
        ("gemini", ["x"], "usage-type", "/0"),
        ("bedrock-converse", {"usage": {"inputTokens": "5"}}, "usage-type", "/usage/inputTokens"),
        ("deepseek", {"choices": []}, "usage-missing", "/usage"),
        ("openai-compatible", "not a body", "usage-type", ""),
        (
            "llama-cpp",
            {"timings": {"cache_n": 1, "prompt_n": 1.5}},
            "usage-type",
            "/timings/prompt_n",
        ),
    ],
)
def test_bad_response_body_pointers_are_rooted_at_the_body(
    wire_format: str, body: Any, code: str, pointer: str
) -> None:
    """parse_response errors point into the whole response body."""
    with pytest.raises(UsageParseError) as info:
        parse_response(wire_format, body)
    assert (info.value.code, info.value.pointer) == (code, pointer)


@pytest.mark.parametrize("wire_format", ["openai", "Anthropic", "", "bedrock"])
def test_unknown_wire_format(wire_format: str) -> None:
    """An unknown wire format is usage-wire-format, listing the valid ones."""
    for call in (
        lambda: parse_usage(wire_format, {}),
        lambda: parse_response(wire_format, {}),
        lambda: parse_stream(wire_format, b""),
        lambda: stream_accumulator(wire_format),
    ):
        with pytest.raises(UsageParseError) as info:
            call()
        assert info.value.code == "usage-wire-format"
        assert "openai-responses" in info.value.message


def test_stream_error_carries_event_pointer_and_offset() -> None:
    """A malformed usage chunk in a stream names its pointer in the chunk and its byte offset."""
    first = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    body = first + b'data: {"choices":[],"usage":{"prompt_tokens":-4}}\n\ndata: [DONE]\n\n'
    with pytest.raises(UsageParseError) as info:
        parse_stream("openai-chat", body)
    assert info.value.code == "usage-negative"
    assert info.value.pointer == "/usage/prompt_tokens"
    assert info.value.offset == len(first)
    assert f"byte {len(first)}" in str(info.value)


def test_anthropic_stream_error_points_at_the_contributing_event() -> None:
    """A bad field from message_delta is reported at that event, under /usage."""
    start = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":'
        b'{"input_tokens":5,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}}\n\n'
    )
    delta = b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":-1}}\n\n'
    with pytest.raises(UsageParseError) as info:
        parse_stream("anthropic", start + delta)
    assert (info.value.code, info.value.pointer, info.value.offset) == (
        "usage-negative",
        "/usage/output_tokens",
        len(start),
    )
    bad_start = start.replace(b'"input_tokens":5', b'"input_tokens":"5"')
    with pytest.raises(UsageParseError) as info:
        parse_stream("anthropic", bad_start)
    assert (info.value.pointer, info.value.offset) == ("/message/usage/input_tokens", 0)


def test_responses_stream_error_pointer() -> None:
    """A bad usage in response.completed points under /response/usage."""
    body = (
        b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r",'
        b'"usage":{"input_tokens":null}}}\n\n'
    )
    with pytest.raises(UsageParseError) as info:
        parse_stream("openai-responses", body)
    assert (info.value.code, info.value.pointer, info.value.offset) == (
        "usage-missing",
        "/response/usage/input_tokens",
        0,
    )


def test_bedrock_stream_error_pointers() -> None:
    """Bedrock errors point under /metadata/usage (JSON lines) with the line's offset."""
    line0 = b'{"messageStart":{"role":"assistant"}}\n'
    body = line0 + b'{"metadata":{"usage":{"inputTokens":-1}}}\n'
    with pytest.raises(UsageParseError) as info:
        parse_stream("bedrock-converse", body)
    assert (info.value.pointer, info.value.offset) == ("/metadata/usage/inputTokens", len(line0))


def test_llama_stream_error_offset_names_the_timings_chunk() -> None:
    """A bad timings field is reported at the chunk that carried the timings."""
    usage_chunk = b'data: {"choices":[],"usage":{"prompt_tokens":5}}\n\n'
    timings_chunk = b'data: {"choices":[],"timings":{"cache_n":"2"}}\n\n'
    with pytest.raises(UsageParseError) as info:
        parse_stream("llama-cpp", usage_chunk + timings_chunk + b"data: [DONE]\n\n")
    assert (info.value.code, info.value.pointer, info.value.offset) == (
        "usage-type",
        "/timings/cache_n",
        len(usage_chunk),
    )


def test_non_bytes_chunk_is_rejected() -> None:
    """Feeding text instead of bytes is a typed error, not a silent conversion."""
    acc = stream_accumulator("gemini")
    with pytest.raises(UsageParseError) as info:
        acc.feed("data: {}\n\n")  # type: ignore[arg-type]
    assert info.value.code == "usage-stream-type"


def test_hostile_usage_objects_are_typed_errors() -> None:
    """An object whose attribute access raises, and a dict subclass whose methods raise, are
    usage-type errors (or read as plain data), never a bare exception (review finding)."""
    from stableprompt.providers import WIRE_FORMATS

    class Explodes:
        def __getattr__(self, name: str) -> object:
            raise RuntimeError("boom")

    class BadDict(dict):  # type: ignore[type-arg]
        def items(self) -> Any:
            raise RuntimeError("boom")

        def get(self, *args: object) -> object:
            raise RuntimeError("boom")

    for fmt in WIRE_FORMATS:
        for bad in (Explodes(), BadDict(input_tokens=1)):
            for parse in (parse_usage, parse_response):
                with pytest.raises(UsageParseError) as info:
                    parse(fmt, bad)
                assert info.value.code == "usage-type"


def test_stream_counts_past_the_decoder_are_overflow_or_undecodable() -> None:
    """2**64 (decoded as a float) is usage-overflow like in parse_usage; 10**5000 is an
    undecodable message_start: unknown usage naming the event, even when deltas follow."""
    def stream(count: bytes) -> bytes:
        return (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
                b'"usage":{"input_tokens":' + count + b',"output_tokens":1}}}\n\n'
                b'event: message_delta\ndata: {"type":"message_delta","usage":'
                b'{"output_tokens":5}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n')

    with pytest.raises(UsageParseError) as info:
        parse_stream("anthropic", stream(str(2**64).encode()))
    assert info.value.code == "usage-overflow"
    usage = parse_stream("anthropic", stream(b"1" + b"0" * 5000))
    assert usage.is_unknown and "undecodable event" in (usage.unknown_reason or "")
    assert "message_start" in (usage.unknown_reason or "")


def test_stream_errors_are_bounded_and_arguments_checked() -> None:
    """A megabyte-long provider error is cut (its length said); a non-callable clock or a
    non-numeric start is a typed error at construction."""
    acc = stream_accumulator("anthropic")
    acc.feed(b'event: error\ndata: {"type":"error","error":{"type":"' + b"e" * 10**6 + b'"}}\n\n')
    usage = acc.finish()
    assert acc.error is not None and len(acc.error) < 600 and "1000000 characters" in acc.error
    assert len(usage.unknown_reason or "") < 1000
    for kwargs in ({"clock": "x"}, {"start": "x"}, {"start": True}):
        with pytest.raises(UsageParseError) as info:
            stream_accumulator("openai-chat", **kwargs)
        assert info.value.code == "usage-stream-type"
