"""Usage parsers on real provider bodies (fixtures/usage_bodies.json) and per-provider rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic.types
import openai.types
import openai.types.responses
import pytest

from stableprompt import CacheUsage
from stableprompt._usage import USAGE_FIELDS
from stableprompt.providers import parse_response, parse_usage

FIXTURES = Path(__file__).parent / "fixtures"
CASES: list[dict[str, Any]] = json.loads((FIXTURES / "usage_bodies.json").read_text("utf-8"))[
    "cases"
]


def _check(usage: CacheUsage, expect: dict[str, Any]) -> None:
    got = {name: getattr(usage, name) for name in USAGE_FIELDS}
    assert got == {name: expect[name] for name in USAGE_FIELDS}
    if expect["hit_rate"] is None:
        assert usage.hit_rate is None
    else:
        numerator, denominator = expect["hit_rate"]
        assert usage.hit_rate == numerator / denominator
    assert not usage.inconsistent, usage.inconsistency
    assert usage.unknown_reason is None


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_real_body_normalizes(case: dict[str, Any]) -> None:
    """Each documented body yields the expected triple, TTL split, output count and hit rate."""
    if case["kind"] == "response":
        usage = parse_response(case["wire_format"], case["body"])
    else:
        usage = parse_usage(case["wire_format"], case["body"])
    assert usage.wire_format == case["wire_format"]
    _check(usage, case["expect"])


def test_every_wire_format_has_a_real_body() -> None:
    """The body table covers all eight wire formats."""
    from stableprompt.providers import WIRE_FORMATS

    assert {c["wire_format"] for c in CASES} == set(WIRE_FORMATS)


def test_raw_usage_is_kept() -> None:
    """The provider's usage object is kept verbatim in raw."""
    body = {"prompt_tokens": 2006, "prompt_tokens_details": {"cached_tokens": 1920}, "x": [1]}
    assert parse_usage("openai-chat", body).raw == body


def test_anthropic_ttl_split_is_not_added_on_top() -> None:
    """cache_creation's 5m/1h split is a breakdown of cache_creation_input_tokens, not extra."""
    usage = parse_usage(
        "anthropic",
        {
            "input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 556,
            "cache_creation": {"ephemeral_5m_input_tokens": 456, "ephemeral_1h_input_tokens": 100},
        },
    )
    assert usage.cache_write_tokens == 556
    assert usage.input_tokens_total == 556
    assert (usage.cache_write_5m_tokens, usage.cache_write_1h_tokens) == (456, 100)


def test_anthropic_split_alone_gives_the_write_total() -> None:
    """Without cache_creation_input_tokens the write is the split's sum (docs: they are equal)."""
    usage = parse_usage(
        "anthropic",
        {
            "input_tokens": 5,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 7, "ephemeral_1h_input_tokens": 3},
        },
    )
    assert (usage.cache_write_tokens, usage.input_tokens_total) == (10, 15)


def test_anthropic_split_disagreeing_with_total_is_flagged() -> None:
    """A TTL split that does not sum to cache_creation_input_tokens is flagged, not fixed."""
    usage = parse_usage(
        "anthropic",
        {
            "input_tokens": 1,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 10,
            "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 10},
        },
    )
    assert usage.cache_write_tokens == 10
    assert usage.inconsistency == "TTL split 5m + 1h (20) does not match cache_write (10)"


def test_anthropic_missing_cache_fields_leave_total_unknown() -> None:
    """Without the cache fields only the uncached remainder is known (None, not 0)."""
    usage = parse_usage("anthropic", {"input_tokens": 18, "output_tokens": 3})
    assert usage.uncached_tokens == 18
    assert usage.cache_read_tokens is None
    assert usage.cache_write_tokens is None
    assert usage.input_tokens_total is None
    assert usage.hit_rate is None


def test_openai_chat_write_is_a_subset_of_prompt_tokens() -> None:
    """GPT-5.6+ cache_write_tokens is subtracted from the inclusive prompt count."""
    usage = parse_usage(
        "openai-chat",
        {
            "prompt_tokens": 5000,
            "prompt_tokens_details": {"cached_tokens": 3000, "cache_write_tokens": 1500},
        },
    )
    assert (usage.uncached_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        500,
        3000,
        1500,
    )


def test_openai_chat_cached_over_prompt_is_flagged_with_negative_remainder() -> None:
    """cached_tokens above prompt_tokens keeps the negative remainder and is flagged."""
    usage = parse_usage(
        "openai-chat", {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 128}}
    )
    assert usage.uncached_tokens == -28
    assert usage.inconsistent


def test_responses_ttl_details_that_disagree_are_flagged() -> None:
    """Responses cache_write_tokens_details (30m/12h) must sum to cache_write_tokens."""
    good = {
        "input_tokens": 100,
        "input_tokens_details": {
            "cached_tokens": 0,
            "cache_write_tokens": 60,
            "cache_write_tokens_details": {"ttl_30m_tokens": 60, "ttl_12h_tokens": 0},
        },
    }
    bad = json.loads(json.dumps(good))
    bad["input_tokens_details"]["cache_write_tokens_details"]["ttl_12h_tokens"] = 5
    assert not parse_usage("openai-responses", good).inconsistent
    assert parse_usage("openai-responses", bad).inconsistency == (
        "cache_write_tokens_details 30m + 12h (65) does not match cache_write_tokens (60)"
    )


def test_deepseek_hit_plus_miss_mismatch_is_flagged() -> None:
    """DeepSeek hit + miss that differs from prompt_tokens is flagged."""
    usage = parse_usage(
        "deepseek",
        {"prompt_tokens": 1000, "prompt_cache_hit_tokens": 768, "prompt_cache_miss_tokens": 200},
    )
    assert usage.cache_read_tokens == 768
    assert usage.inconsistency == (
        "prompt_cache_hit_tokens + prompt_cache_miss_tokens (968) != prompt_tokens (1000)"
    )


def test_deepseek_without_prompt_tokens_uses_hit_plus_miss() -> None:
    """The DeepSeek total falls back to hit + miss, and the read to the complement of miss."""
    usage = parse_usage("deepseek", {"prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36})
    assert (usage.input_tokens_total, usage.cache_read_tokens) == (100, 64)
    only_miss = parse_usage("deepseek", {"prompt_tokens": 100, "prompt_cache_miss_tokens": 36})
    assert only_miss.cache_read_tokens == 64
    assert only_miss.uncached_tokens == 36


def test_openai_compatible_fallbacks() -> None:
    """Without prompt_tokens_details, DeepSeek-style hits and Moonshot's cached_tokens are read."""
    deepseek_like = parse_usage(
        "openai-compatible", {"prompt_tokens": 100, "prompt_cache_hit_tokens": 64}
    )
    moonshot = parse_usage("openai-compatible", {"prompt_tokens": 100, "cached_tokens": 80})
    assert deepseek_like.cache_read_tokens == 64
    assert moonshot.cache_read_tokens == 80


def test_openai_compatible_reads_anthropic_shaped_usage_inclusively() -> None:
    """Without prompt_tokens, Anthropic's field names are read with an inclusive input_tokens
    (Anthropic-compatible servers that count the whole prompt there)."""
    usage = parse_usage("openai-compatible", {
        "input_tokens": 3000, "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 1500, "output_tokens": 7})
    assert (usage.input_tokens_total, usage.uncached_tokens) == (3000, 500)
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens) == (
        1000, 1500, 7)
    assert not usage.inconsistent


def test_gemini_output_includes_thoughts_and_zero_cache_when_omitted() -> None:
    """Gemini output = candidates + thoughts; an omitted cached count is proto3's 0."""
    usage = parse_usage(
        "gemini", {"promptTokenCount": 50, "candidatesTokenCount": 10, "thoughtsTokenCount": 90}
    )
    assert usage.output_tokens == 100
    assert usage.cache_read_tokens == 0
    assert usage.cache_write_tokens is None
    assert usage.hit_rate == 0.0


def test_gemini_response_array_uses_last_chunk_with_usage() -> None:
    """A non-SSE streamGenerateContent array is searched from the end for usageMetadata."""
    body = [
        {"usageMetadata": {"promptTokenCount": 10}},
        {"usageMetadata": {"promptTokenCount": 10, "cachedContentTokenCount": 8}},
        {"candidates": []},
    ]
    assert parse_response("gemini", body).cache_read_tokens == 8


def test_bedrock_details_alone_give_the_write_total() -> None:
    """Bedrock cacheDetails sum to the write when cacheWriteInputTokens is absent."""
    usage = parse_usage(
        "bedrock-converse",
        {
            "inputTokens": 1,
            "cacheReadInputTokens": 0,
            "cacheDetails": [{"ttl": "5m", "inputTokens": 3}, {"ttl": "5m", "inputTokens": 4}],
        },
    )
    assert (usage.cache_write_tokens, usage.cache_write_5m_tokens, usage.cache_write_1h_tokens) == (
        7,
        7,
        0,
    )
    assert usage.input_tokens_total == 8


def test_bedrock_unknown_ttl_is_flagged() -> None:
    """A TTL other than 5m/1h in cacheDetails is reported as an inconsistency note."""
    usage = parse_usage(
        "bedrock-converse",
        {
            "inputTokens": 1,
            "cacheReadInputTokens": 0,
            "cacheWriteInputTokens": 5,
            "cacheDetails": [{"ttl": "24h", "inputTokens": 5}],
        },
    )
    assert "unrecognized cache TTL '24h' at /cacheDetails/0 (5 tokens)" in (
        usage.inconsistency or ""
    )


def test_llama_cpp_disagreeing_sources_are_flagged() -> None:
    """usage.cached_tokens vs timings.cache_n disagreement is flagged; usage wins."""
    usage = parse_usage(
        "llama-cpp",
        {
            "usage": {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}},
            "timings": {"cache_n": 60, "prompt_n": 40},
        },
    )
    assert usage.cache_read_tokens == 64
    assert usage.inconsistency == "usage cached_tokens (64) != timings.cache_n (60)"


def test_llama_cpp_bare_usage_object() -> None:
    """A bare OpenAI usage object is accepted for llama-cpp."""
    usage = parse_usage(
        "llama-cpp", {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 4}}
    )
    assert (usage.input_tokens_total, usage.cache_read_tokens) == (10, 4)


def test_official_sdk_usage_models_are_accepted() -> None:
    """The official SDKs' usage models parse the same as their JSON."""
    anthropic_json = {
        "input_tokens": 21,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 188086,
        "output_tokens": 393,
    }
    chat_json = {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920},
    }
    responses_json = {
        "input_tokens": 12033,
        "input_tokens_details": {"cached_tokens": 11904, "cache_write_tokens": 0},
        "output_tokens": 44,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 12077,
    }
    pairs = [
        ("anthropic", anthropic.types.Usage.model_validate(anthropic_json), anthropic_json),
        ("openai-chat", openai.types.CompletionUsage.model_validate(chat_json), chat_json),
        (
            "openai-responses",
            openai.types.responses.ResponseUsage.model_validate(responses_json),
            responses_json,
        ),
    ]
    for wire_format, model, as_json in pairs:
        from_model = parse_usage(wire_format, model)
        from_json = parse_usage(wire_format, as_json)
        assert from_model.model_dump(exclude={"raw"}) == from_json.model_dump(exclude={"raw"})
        assert from_model.cache_read_tokens == from_json.cache_read_tokens is not None
