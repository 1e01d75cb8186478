"""Stream accumulators give the same usage however the bytes are chunked."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt import CacheUsage
from stableprompt.providers import parse_stream, stream_accumulator

FIXTURES = Path(__file__).parent / "fixtures"

TRANSCRIPTS = [
    ("anthropic", "anthropic_sdk_recorded.sse"),
    ("anthropic", "anthropic_cached_ttl.sse"),
    ("anthropic", "anthropic_sdk_iterations.sse"),
    ("openai-chat", "openai_sdk_recorded_chat.sse"),
    ("openai-chat", "openai_chat_final_usage.sse"),
    ("openai-compatible", "openai_chat_cumulative_usage.sse"),
    ("openai-responses", "openai_responses_completed.sse"),
    ("gemini", "gemini_stream.sse"),
    ("llama-cpp", "llama_cpp_stream.sse"),
    ("bedrock-converse", "bedrock_converse_stream.jsonl"),
]


def _run(wire_format: str, data: bytes, cuts: list[int]) -> tuple[CacheUsage, str | None]:
    acc = stream_accumulator(wire_format, clock=lambda: 0.0, start=0.0)
    previous = 0
    for cut in sorted(cuts):
        acc.feed(data[previous:cut])
        previous = cut
    acc.feed(data[previous:])
    return acc.finish(), acc.response_id


@pytest.mark.parametrize("name", ["anthropic_cached_ttl.sse", "anthropic_sdk_recorded.sse"])
@pytest.mark.parametrize("line_end", [b"\n", b"\r\n"])
def test_anthropic_every_byte_offset(name: str, line_end: bytes) -> None:
    """Splitting an Anthropic transcript at every byte (mid-UTF-8, mid-CRLF) changes nothing."""
    data = (FIXTURES / name).read_bytes().replace(b"\n", line_end)
    expected = (parse_stream("anthropic", data), _run("anthropic", data, [])[1])
    assert expected[0].cache_read_tokens is not None
    for cut in range(len(data) + 1):
        assert _run("anthropic", data, [cut]) == expected, cut


@pytest.mark.parametrize(("wire_format", "name"), TRANSCRIPTS)
def test_every_transcript_every_byte_offset(wire_format: str, name: str) -> None:
    """Every transcript gives one result for every two-piece split."""
    data = (FIXTURES / name).read_bytes()
    expected = _run(wire_format, data, [])
    assert not expected[0].is_unknown
    for cut in range(len(data) + 1):
        assert _run(wire_format, data, [cut]) == expected, cut


@pytest.mark.parametrize(("wire_format", "name"), TRANSCRIPTS)
def test_byte_by_byte(wire_format: str, name: str) -> None:
    """Feeding one byte at a time gives the one-shot result."""
    data = (FIXTURES / name).read_bytes()
    assert _run(wire_format, data, list(range(len(data)))) == _run(wire_format, data, [])


@settings(max_examples=60, deadline=None)
@given(
    index=st.integers(min_value=0, max_value=len(TRANSCRIPTS) - 1),
    fractions=st.lists(st.floats(min_value=0, max_value=1), max_size=12),
)
def test_random_chunkings(index: int, fractions: list[float]) -> None:
    """Any set of cut points gives the one-shot result, for every wire format."""
    wire_format, name = TRANSCRIPTS[index]
    data = (FIXTURES / name).read_bytes()
    cuts = [int(f * len(data)) for f in fractions]
    assert _run(wire_format, data, cuts) == _run(wire_format, data, [])
