"""Stream accumulators on recorded and documented SSE transcripts (stableprompt.providers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stableprompt import CacheUsage, parse_stream
from stableprompt._wire.bedrock import encode_event
from stableprompt.providers import StreamAccumulator, stream_accumulator

FIXTURES = Path(__file__).parent / "fixtures"


def _read(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _triple(usage: CacheUsage) -> tuple[int | None, int | None, int | None, int | None]:
    return (
        usage.input_tokens_total,
        usage.uncached_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )


def _events(data: bytes) -> list[bytes]:
    """Split an SSE body into its events (each with its trailing blank line)."""
    sep = b"\r\n\r\n" if b"\r\n" in data else b"\n\n"
    return [part + sep for part in data.split(sep) if part]


class _Clock:
    """A settable fake monotonic clock (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return self.now


# --- Anthropic -------------------------------------------------------------------------------


def test_anthropic_sdk_recorded_stream() -> None:
    """The SDK's recorded stream: message_delta overwrites output, cache fields stay 0."""
    acc = stream_accumulator("anthropic")
    acc.feed(_read("anthropic_sdk_recorded.sse"))
    usage = acc.finish()
    assert _triple(usage) == (135, 135, 0, 0)
    assert (usage.cache_write_5m_tokens, usage.cache_write_1h_tokens) == (0, 0)
    assert usage.output_tokens == 10  # from message_delta, not message_start's 1, not 11
    assert usage.hit_rate == 0.0
    assert acc.response_id == "msg_013nnniYDrJDocdy5nrMU7cH"
    assert acc.model == "claude-sonnet-4-5-20250929"
    assert usage.unknown_reason is None and not usage.inconsistent


def test_anthropic_cached_stream_keeps_start_fields_and_ttl_split() -> None:
    """Cache fields and the TTL split survive a message_delta that only sends output_tokens."""
    usage = parse_stream("anthropic", _read("anthropic_cached_ttl.sse"))
    assert _triple(usage) == (188663, 21, 188086, 556)
    assert (usage.cache_write_5m_tokens, usage.cache_write_1h_tokens) == (456, 100)
    assert usage.output_tokens == 393
    assert usage.hit_rate == 188086 / 188663
    assert usage.raw["output_tokens"] == 393
    assert not usage.inconsistent


def test_anthropic_iterations_in_message_delta_are_tolerated() -> None:
    """usage.iterations[] in message_delta is kept in raw and does not disturb the counts."""
    usage = parse_stream("anthropic", _read("anthropic_sdk_iterations.sse"))
    assert _triple(usage) == (31, 31, 0, 0)
    assert usage.output_tokens == 547
    assert usage.raw["iterations"][0]["output_tokens"] == 547


_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def test_anthropic_delta_counts_overwrite_never_sum() -> None:
    """Several message_delta events overwrite each other (cumulative), never add."""
    body = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_x","usage":'
        b'{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":100,'
        b'"output_tokens":1}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{},"usage":'
        b'{"output_tokens":7,"cache_read_input_tokens":null}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{},"usage":'
        b'{"output_tokens":9,"input_tokens":6}}\n\n'
    )
    usage = parse_stream("anthropic", body + _STOP)
    assert usage.output_tokens == 9
    assert usage.cache_read_tokens == 100  # null in a delta does not erase message_start's value
    assert usage.uncached_tokens == 6
    assert usage.input_tokens_total == 106


def test_anthropic_delta_changing_the_write_drops_the_stale_ttl_split() -> None:
    """A message_delta that changes cache_creation_input_tokens makes message_start's 5m/1h
    split unknown instead of an inconsistency; an unchanged write keeps the split."""
    start = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_x","usage":'
        b'{"input_tokens":5,"cache_creation_input_tokens":300,"cache_read_input_tokens":0,'
        b'"cache_creation":{"ephemeral_5m_input_tokens":200,"ephemeral_1h_input_tokens":100},'
        b'"output_tokens":1}}}\n\n'
    )

    def delta(write: int) -> bytes:
        return (b'event: message_delta\ndata: {"type":"message_delta","delta":{},"usage":'
                b'{"output_tokens":9,"cache_creation_input_tokens":%d}}\n\n' % write) + _STOP

    changed = parse_stream("anthropic", start + delta(450))
    assert changed.cache_write_tokens == 450 and changed.input_tokens_total == 455
    assert (changed.cache_write_5m_tokens, changed.cache_write_1h_tokens) == (None, None)
    assert not changed.inconsistent and changed.unknown_reason is None
    assert changed.raw["cache_creation"] == {"ephemeral_5m_input_tokens": 200,
                                             "ephemeral_1h_input_tokens": 100}
    same = parse_stream("anthropic", start + delta(300))
    assert (same.cache_write_5m_tokens, same.cache_write_1h_tokens) == (200, 100)


def test_anthropic_cut_after_a_non_final_message_delta_is_partial() -> None:
    """A stream cut after a message_delta but before message_stop is not complete: the input
    side is kept, output_tokens is unknown and the stream counts as interrupted (issue 9 #1)."""
    data = _read("anthropic_cached_ttl.sse")
    cut = data.index(b"event: message_stop")
    accumulator = stream_accumulator("anthropic")
    accumulator.feed(data[:cut])
    usage = accumulator.finish()
    assert accumulator.interrupted
    assert usage.output_tokens is None and usage.cache_read_tokens is not None
    assert "message_stop" in (usage.unknown_reason or "")
    whole = parse_stream("anthropic", data)
    assert whole.output_tokens is not None and whole.unknown_reason is None


def test_anthropic_interrupted_after_message_start_keeps_input_side() -> None:
    """A stream cut before message_delta keeps the input counts and marks output unknown."""
    data = _read("anthropic_cached_ttl.sse")
    cut = data.index(b"event: message_delta")
    usage = parse_stream("anthropic", data[:cut])
    assert _triple(usage) == (188663, 21, 188086, 556)
    assert usage.output_tokens is None
    assert usage.unknown_reason == "stream ended before message_delta: output_tokens unknown"


def test_anthropic_interrupted_before_message_start_is_unknown() -> None:
    """A stream cut inside message_start yields unknown usage with a reason."""
    data = _read("anthropic_sdk_recorded.sse")
    usage = parse_stream("anthropic", data[:80])
    assert usage.is_unknown
    assert usage.unknown_reason == "stream ended before message_start: no usage reported"


def test_anthropic_error_event_is_reported() -> None:
    """An in-stream error event is recorded and named in the unknown reason."""
    body = (
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"Overloaded"}}\n\n'
    )
    acc = stream_accumulator("anthropic")
    acc.feed(body)
    usage = acc.finish()
    assert acc.error == "overloaded_error"
    assert usage.is_unknown
    assert (
        usage.unknown_reason is not None
        and "provider error: overloaded_error" in usage.unknown_reason
    )


# --- OpenAI chat and chat-shaped formats -------------------------------------------------------


def test_openai_sdk_recorded_final_usage_chunk() -> None:
    """The SDK's recorded gpt-4o stream: usage from the choices: [] chunk, no cache details."""
    acc = stream_accumulator("openai-chat")
    acc.feed(_read("openai_sdk_recorded_chat.sse"))
    usage = acc.finish()
    assert usage.input_tokens_total == 14
    assert usage.output_tokens == 47
    assert usage.cache_read_tokens is None  # not sent: unknown, not 0
    assert usage.hit_rate is None
    assert acc.response_id == "chatcmpl-9tXjg9DdaOfymTPDrSLfxslQEH0C2"
    assert acc.model == "gpt-4o-2024-08-06"


def test_openai_chat_final_usage_with_cached_tokens() -> None:
    """The include_usage final chunk gives the guide's 2006/1920 split."""
    usage = parse_stream("openai-chat", _read("openai_chat_final_usage.sse"))
    assert _triple(usage) == (2006, 86, 1920, None)
    assert usage.output_tokens == 300
    assert usage.hit_rate == 1920 / 2006


def test_openai_chat_cumulative_usage_keeps_the_last() -> None:
    """Cumulative usage on every chunk: the last non-null wins, nothing is summed."""
    usage = parse_stream("openai-compatible", _read("openai_chat_cumulative_usage.sse"))
    assert _triple(usage) == (2062, 14, 2048, None)
    assert usage.output_tokens == 38
    assert usage.unknown_reason is None


def test_cumulative_usage_cut_mid_stream_marks_output_unknown() -> None:
    """Cumulative usage cut before finish_reason keeps the input side, output unknown."""
    events = _events(_read("openai_chat_cumulative_usage.sse"))
    usage = parse_stream("openai-compatible", b"".join(events[:3]))
    assert _triple(usage) == (2062, 14, 2048, None)
    assert usage.output_tokens is None
    assert usage.unknown_reason is not None and "output_tokens unknown" in usage.unknown_reason


@pytest.mark.parametrize("name", ["openai_sdk_recorded_chat.sse", "openai_chat_final_usage.sse"])
def test_openai_chat_interrupted_before_usage_chunk_is_unknown(name: str) -> None:
    """A chat stream cut before its usage chunk yields unknown usage, not zeros."""
    events = _events(_read(name))
    usage = parse_stream("openai-chat", b"".join(events[:-2]))
    assert usage.is_unknown
    assert usage.unknown_reason == "stream ended before its usage chunk (interrupted)"


def test_openai_chat_without_include_usage_explains_why() -> None:
    """A complete stream without usage says to request include_usage."""
    events = [e for e in _events(_read("openai_chat_final_usage.sse")) if b'"choices":[]' not in e]
    usage = parse_stream("openai-chat", b"".join(events))
    assert usage.is_unknown
    assert usage.unknown_reason is not None and "include_usage" in usage.unknown_reason


def test_deepseek_stream_uses_deepseek_fields() -> None:
    """A DeepSeek stream's final usage chunk is read with the DeepSeek hit/miss fields."""
    chunk = {
        "id": "ds-1",
        "choices": [],
        "usage": {
            "prompt_tokens": 1000,
            "completion_tokens": 214,
            "prompt_cache_hit_tokens": 768,
            "prompt_cache_miss_tokens": 232,
        },
    }
    body = (
        b'data: {"id":"ds-1","choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}\n\n'
        + b"data: "
        + json.dumps(chunk).encode()
        + b"\n\ndata: [DONE]\n\n"
    )
    usage = parse_stream("deepseek", body)
    assert _triple(usage) == (1000, 232, 768, None)
    assert usage.wire_format == "deepseek"


def test_llama_cpp_stream_with_usage_and_timings() -> None:
    """llama-server's last chunk: usage cached_tokens agrees with timings.cache_n."""
    usage = parse_stream("llama-cpp", _read("llama_cpp_stream.sse"))
    assert _triple(usage) == (10000, 1500, 8500, None)
    assert usage.output_tokens == 20
    assert usage.raw["timings"]["cache_n"] == 8500
    assert not usage.inconsistent


def test_llama_cpp_stream_with_timings_only() -> None:
    """Without include_usage, timings on the last chunk give prompt = cache_n + prompt_n."""
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
        b'"timings":{"cache_n":8500,"prompt_n":1500,"predicted_n":20}}\n\n'
        b"data: [DONE]\n\n"
    )
    usage = parse_stream("llama-cpp", body)
    assert _triple(usage) == (10000, 1500, 8500, None)
    assert usage.output_tokens == 20


def test_llama_cpp_native_completion_stream() -> None:
    """llama-server's native /completion stream: content chunks, then stop with timings."""
    clock = _Clock()
    acc = stream_accumulator("llama-cpp", clock=clock, start=0.0)
    clock.now = 0.25
    acc.feed(b'data: {"content":"Hel","stop":false}\n\n')
    clock.now = 0.5
    acc.feed(b'data: {"content":"","stop":true,"timings":{"cache_n":30,"prompt_n":2}}\n\n')
    usage = acc.finish()
    assert _triple(usage) == (32, 2, 30, None)
    assert acc.ttft_ms == 250.0


# --- Responses, Gemini, Bedrock ----------------------------------------------------------------


def test_responses_completed_event() -> None:
    """Responses usage comes from response.completed; created/in_progress carry null."""
    acc = stream_accumulator("openai-responses")
    acc.feed(_read("openai_responses_completed.sse"))
    usage = acc.finish()
    assert _triple(usage) == (16909, 1165, 15744, None)
    assert usage.output_tokens == 54
    assert usage.hit_rate == 15744 / 16909
    assert acc.response_id == "resp_fixture_cached"
    assert acc.model == "gpt-5.2-codex"


def test_responses_interrupted_before_completed_is_unknown() -> None:
    """A Responses stream cut before response.completed has unknown usage."""
    data = _read("openai_responses_completed.sse")
    usage = parse_stream("openai-responses", data[: data.index(b"event: response.completed")])
    assert usage.is_unknown
    assert usage.unknown_reason == (
        "stream ended before response.completed/incomplete/failed: no usage reported"
    )


def test_responses_failed_without_usage() -> None:
    """response.failed with null usage is unknown, naming the event and the error code."""
    body = (
        b'event: response.failed\ndata: {"type":"response.failed","response":{"id":"resp_f",'
        b'"status":"failed","error":{"code":"server_error","message":"x"},"usage":null}}\n\n'
    )
    usage = parse_stream("openai-responses", body)
    assert usage.unknown_reason == "response.failed carried no usage; provider error: server_error"


def test_responses_incomplete_event_has_usage() -> None:
    """response.incomplete carries usage like response.completed."""
    body = (
        b'event: response.incomplete\ndata: {"type":"response.incomplete","response":{"id":"r",'
        b'"usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":256,'
        b'"cache_write_tokens":0},"output_tokens":16}}}\n\n'
    )
    assert _triple(parse_stream("openai-responses", body)) == (300, 44, 256, 0)


def test_gemini_stream_takes_the_last_usage_chunk() -> None:
    """Gemini: the last chunk with usageMetadata wins (CRLF-delimited SSE)."""
    acc = stream_accumulator("gemini")
    acc.feed(_read("gemini_stream.sse"))
    usage = acc.finish()
    assert _triple(usage) == (141236, 1236, 140000, None)
    assert usage.output_tokens == 95
    assert acc.response_id == "fixture-gemini-resp-1"
    assert acc.model == "gemini-2.5-flash"


def test_gemini_stream_cut_before_finish_reason() -> None:
    """A Gemini stream cut before finishReason keeps the last usage's input side only."""
    events = _events(_read("gemini_stream.sse"))
    usage = parse_stream("gemini", b"".join(events[:2]))
    assert _triple(usage) == (141236, 141236, 0, None)
    assert usage.output_tokens is None
    assert usage.unknown_reason == "stream ended before finishReason: output_tokens unknown"


def test_bedrock_json_lines_metadata_event() -> None:
    """Bedrock ConverseStream (JSON lines): usage from the metadata event."""
    usage = parse_stream("bedrock-converse", _read("bedrock_converse_stream.jsonl"))
    assert _triple(usage) == (2066, 18, 2048, 0)
    assert usage.output_tokens == 50
    assert usage.hit_rate == 2048 / 2066


def test_bedrock_json_lines_without_final_newline() -> None:
    """The last JSON line is read even without a trailing newline."""
    data = _read("bedrock_converse_stream.jsonl").rstrip(b"\n")
    assert parse_stream("bedrock-converse", data).cache_read_tokens == 2048


def _eventstream() -> bytes:
    out = b""
    for line in _read("bedrock_converse_stream.jsonl").splitlines():
        ((kind, body),) = json.loads(line).items()
        out += encode_event(kind, json.dumps(body).encode())
    return out


def test_bedrock_binary_eventstream() -> None:
    """The binary vnd.amazon.eventstream framing is decoded, byte by byte too."""
    data = _eventstream()
    assert _triple(parse_stream("bedrock-converse", data)) == (2066, 18, 2048, 0)
    acc = stream_accumulator("bedrock-converse")
    for index in range(len(data)):
        acc.feed(data[index : index + 1])
    assert _triple(acc.finish()) == (2066, 18, 2048, 0)
    assert acc.buffered_bytes == 0


def test_bedrock_binary_eventstream_corruption_is_reported() -> None:
    """A CRC failure stops decoding and the reason says where."""
    data = bytearray(_eventstream())
    data[-10] ^= 0xFF  # inside the metadata event's payload
    usage = parse_stream("bedrock-converse", bytes(data))
    assert usage.is_unknown
    assert (
        usage.unknown_reason is not None and "bad eventstream message CRC" in usage.unknown_reason
    )


def test_bedrock_exception_event_is_reported() -> None:
    """An eventstream exception message is recorded as the stream's error."""
    data = encode_event("throttlingException", b'{"message":"slow down"}', message_type="exception")
    acc = stream_accumulator("bedrock-converse")
    acc.feed(data)
    assert acc.finish().is_unknown
    assert acc.error == "throttlingException"


# --- Shared behaviour ----------------------------------------------------------------------------

_TTFT_CASES = [
    ("anthropic", "anthropic_sdk_recorded.sse", 3),
    ("anthropic", "anthropic_cached_ttl.sse", 3),
    ("openai-chat", "openai_sdk_recorded_chat.sse", 1),
    ("openai-compatible", "openai_chat_cumulative_usage.sse", 1),
    ("openai-responses", "openai_responses_completed.sse", 3),
    ("gemini", "gemini_stream.sse", 0),
    ("llama-cpp", "llama_cpp_stream.sse", 1),
]


@pytest.mark.parametrize(("wire_format", "name", "first_content"), _TTFT_CASES)
def test_ttft_is_the_first_content_event(wire_format: str, name: str, first_content: int) -> None:
    """TTFT is measured at the first text/tool-call delta, not at earlier events."""
    clock = _Clock()
    acc = stream_accumulator(wire_format, clock=clock, start=10.0)
    for index, event in enumerate(_events(_read(name))):
        clock.now = 10.0 + (index + 1) * 0.125
        acc.feed(event)
    assert acc.ttft_ms == pytest.approx((first_content + 1) * 125.0)
    assert acc.first_content_at == 10.0 + (first_content + 1) * 0.125
    assert acc.finish().unknown_reason is None


def test_ttft_for_bedrock_content_block_delta() -> None:
    """Bedrock TTFT is the first contentBlockDelta line."""
    clock = _Clock()
    acc = stream_accumulator("bedrock-converse", clock=clock, start=0.0)
    for index, line in enumerate(_read("bedrock_converse_stream.jsonl").splitlines(keepends=True)):
        clock.now = index + 1.0
        acc.feed(line)
    assert acc.ttft_ms == 2000.0


def test_ttft_none_without_content() -> None:
    """No content-bearing event means no TTFT."""
    acc = stream_accumulator("openai-chat", clock=_Clock(), start=0.0)
    acc.feed(b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n')
    assert acc.ttft_ms is None


def test_default_clock_and_start() -> None:
    """Without an injected clock the start is taken from time.monotonic at construction."""
    import time

    before = time.monotonic()
    acc = stream_accumulator("anthropic")
    assert before <= acc.start <= time.monotonic()


def test_accumulator_never_modifies_or_retains_the_chunks() -> None:
    """Fed chunks are left byte-identical and the body is not retained."""
    data = _read("openai_chat_final_usage.sse")
    chunks = [bytearray(data[i : i + 37]) for i in range(0, len(data), 37)]
    copies = [bytes(c) for c in chunks]
    acc = stream_accumulator("openai-chat")
    high_water = 0
    for chunk in chunks:
        acc.feed(memoryview(chunk))
        high_water = max(high_water, acc.buffered_bytes)
    assert [bytes(c) for c in chunks] == copies
    assert high_water <= max(len(line) for line in data.split(b"\n"))
    assert acc.buffered_bytes == 0
    assert acc.bytes_seen == len(data)


def test_finish_is_idempotent_and_feed_after_finish_raises() -> None:
    """finish() returns the same result twice; feeding afterwards is an error."""
    from stableprompt import UsageParseError

    acc = stream_accumulator("openai-chat")
    acc.feed(_read("openai_chat_final_usage.sse"))
    first = acc.finish()
    assert acc.finish() is first
    assert acc.finished
    with pytest.raises(UsageParseError) as info:
        acc.feed(b"data: {}\n\n")
    assert info.value.code == "usage-stream-closed"


def test_undecodable_events_are_counted_not_raised() -> None:
    """A non-JSON data line is recorded with its offset and named if usage never arrives."""
    acc: StreamAccumulator = stream_accumulator("openai-chat")
    acc.feed(b"data: not json\n\ndata: [1, 2]\n\n")
    usage = acc.finish()
    assert acc.undecodable_events == [0, 16]
    assert usage.unknown_reason == (
        "stream ended before its usage chunk (interrupted); 2 undecodable event(s) at byte 0, 16"
    )
