"""The public stableprompt.providers sub-namespace."""

from __future__ import annotations

import stableprompt
import stableprompt.providers as providers


def test_all_is_sorted_and_complete() -> None:
    """providers.__all__ is sorted (ruff's isort style) and lists exactly the public names."""
    public = {name for name in vars(providers) if not name.startswith("_")}
    modules = {
        "anthropic",
        "bedrock",
        "deepseek",
        "gemini",
        "llama_cpp",
        "openai_chat",
        "openai_compatible",
        "openai_responses",
    }
    isort_style = sorted(providers.__all__, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    assert list(providers.__all__) == isort_style
    assert set(providers.__all__) == public - modules


def test_wire_formats() -> None:
    """WIRE_FORMATS lists the eight wire formats of issue 3, sorted."""
    assert providers.WIRE_FORMATS == (
        "anthropic",
        "bedrock-converse",
        "deepseek",
        "gemini",
        "llama-cpp",
        "openai-chat",
        "openai-compatible",
        "openai-responses",
    )


def test_accumulators_match_their_wire_format() -> None:
    """stream_accumulator returns a StreamAccumulator whose wire_format is the one asked for."""
    for wire_format in providers.WIRE_FORMATS:
        accumulator = providers.stream_accumulator(wire_format, clock=lambda: 1.0)
        assert isinstance(accumulator, providers.StreamAccumulator)
        assert accumulator.wire_format == wire_format
        assert accumulator.start == 1.0
        assert accumulator.finish().wire_format == wire_format


def test_top_level_functions_are_the_namespace_functions() -> None:
    """stableprompt.parse_usage / parse_stream are the providers functions."""
    assert stableprompt.parse_usage is providers.parse_usage
    assert stableprompt.parse_stream is providers.parse_stream
