"""Property tests: every parser keeps uncached + cache_read + cache_write == input_tokens_total."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from stableprompt import CacheUsage
from stableprompt.providers import WIRE_FORMATS, parse_usage

counts = st.integers(min_value=0, max_value=2_000_000)
Expected = tuple[int | None, int | None, int | None, int | None]  # total, uncached, read, write


def _maybe(draw: st.DrawFn, value: Any) -> Any:
    """Either the value or None (meaning: the field is not sent)."""
    return value if draw(st.booleans()) else None


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        target[key] = value


def _anthropic_split(part: int, rest: int) -> tuple[str, Any]:
    return "cache_creation", {"ephemeral_5m_input_tokens": part, "ephemeral_1h_input_tokens": rest}


def _bedrock_split(part: int, rest: int) -> tuple[str, Any]:
    details = [{"ttl": "1h", "inputTokens": part}, {"ttl": "5m", "inputTokens": rest}]
    return "cacheDetails", [d for d in details if d["inputTokens"]]


@st.composite
def exclusive_case(
    draw: st.DrawFn,
    keys: tuple[str, str, str, str],
    split: Callable[[int, int], tuple[str, Any]],
) -> tuple[dict[str, Any], Expected]:
    """A body of a provider whose input count excludes cache reads and writes.

    ``keys`` are the (uncached, output, read, write) field names; ``split(part, rest)`` gives
    the TTL breakdown's key and value for a write of ``part + rest`` tokens.
    """
    uncached_key, output_key, read_key, write_key = keys
    uncached, read, write = draw(counts), _maybe(draw, draw(counts)), _maybe(draw, draw(counts))
    body: dict[str, Any] = {uncached_key: uncached, output_key: draw(counts)}
    _put(body, read_key, read)
    _put(body, write_key, write)
    if write is not None and draw(st.booleans()):
        part = draw(st.integers(min_value=0, max_value=write))
        key, value = split(part, write - part)
        body[key] = value
    total = uncached + read + write if read is not None and write is not None else None
    return body, (total, uncached, read, write)


@st.composite
def _inclusive(draw: st.DrawFn) -> tuple[int, int | None, int | None]:
    total = draw(counts)
    read = _maybe(draw, draw(st.integers(min_value=0, max_value=total)))
    write = None
    if read is not None:
        write = _maybe(draw, draw(st.integers(min_value=0, max_value=total - read)))
    return total, read, write


def _inclusive_expected(total: int, read: int | None, write: int | None) -> Expected:
    uncached = total - read - (write or 0) if read is not None else None
    return total, uncached, read, write


@st.composite
def details_case(
    draw: st.DrawFn, keys: tuple[str, str, str], *, null_details: bool = False
) -> tuple[dict[str, Any], Expected]:
    """An OpenAI-style body: ``keys`` are the (total, output, details) field names; with
    ``null_details`` an empty details object may be sent as ``null``."""
    total_key, output_key, details_key = keys
    total, read, write = draw(_inclusive())
    body: dict[str, Any] = {total_key: total, output_key: draw(counts)}
    details: dict[str, Any] = {}
    _put(details, "cached_tokens", read)
    _put(details, "cache_write_tokens", write)
    if details or (null_details and draw(st.booleans())):
        body[details_key] = details or None
    return body, _inclusive_expected(total, read, write)


@st.composite
def gemini_case(draw: st.DrawFn) -> tuple[dict[str, Any], Expected]:
    total = draw(counts)
    read = draw(st.integers(min_value=0, max_value=total))
    body: dict[str, Any] = {"promptTokenCount": total}
    if read or draw(st.booleans()):  # proto3 JSON may omit a zero
        body["cachedContentTokenCount"] = read
    return body, (total, total - read, read, None)


@st.composite
def deepseek_case(draw: st.DrawFn) -> tuple[dict[str, Any], Expected]:
    hit, miss = draw(counts), draw(counts)
    body: dict[str, Any] = {
        "prompt_tokens": hit + miss,
        "prompt_cache_hit_tokens": hit,
        "prompt_cache_miss_tokens": miss,
    }
    if draw(st.booleans()):
        body["prompt_tokens_details"] = {"cached_tokens": hit}
    return body, (hit + miss, miss, hit, None)


@st.composite
def llama_case(draw: st.DrawFn) -> tuple[dict[str, Any], Expected]:
    cache_n, prompt_n = draw(counts), draw(counts)
    body: dict[str, Any] = {"timings": {"cache_n": cache_n, "prompt_n": prompt_n}}
    if draw(st.booleans()):
        usage: dict[str, Any] = {"prompt_tokens": cache_n + prompt_n}
        if draw(st.booleans()):
            usage["prompt_tokens_details"] = {"cached_tokens": cache_n}
        body["usage"] = usage
    return body, (cache_n + prompt_n, prompt_n, cache_n, None)


_ANTHROPIC_KEYS = (
    "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"
)
_BEDROCK_KEYS = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
_CHAT_KEYS = ("prompt_tokens", "completion_tokens", "prompt_tokens_details")
_RESPONSES_KEYS = ("input_tokens", "output_tokens", "input_tokens_details")

CASES = {
    "anthropic": exclusive_case(_ANTHROPIC_KEYS, _anthropic_split),
    "bedrock-converse": exclusive_case(_BEDROCK_KEYS, _bedrock_split),
    "openai-chat": details_case(_CHAT_KEYS, null_details=True),
    "openai-compatible": details_case(_CHAT_KEYS, null_details=True),
    "openai-responses": details_case(_RESPONSES_KEYS),
    "gemini": gemini_case(),
    "deepseek": deepseek_case(),
    "llama-cpp": llama_case(),
}


def _assert_invariant(usage: CacheUsage) -> None:
    known = (usage.input_tokens_total, usage.uncached_tokens, usage.cache_read_tokens)
    if None not in known and usage.cache_write_tokens is not None and not usage.inconsistent:
        assert (usage.uncached_tokens or 0) + (usage.cache_read_tokens or 0) + (
            usage.cache_write_tokens or 0
        ) == usage.input_tokens_total
    if not usage.inconsistent:
        for value in known:
            assert value is None or value >= 0
        if usage.hit_rate is not None:
            assert 0.0 <= usage.hit_rate <= 1.0


def test_every_wire_format_has_a_strategy() -> None:
    """The property tests cover every registered wire format."""
    assert set(CASES) == set(WIRE_FORMATS)


@given(st.sampled_from(sorted(CASES)).flatmap(lambda wf: st.tuples(st.just(wf), CASES[wf])))
def test_consistent_reports_normalize_exactly(
    case: tuple[str, tuple[dict[str, Any], Expected]],
) -> None:
    """A provider-consistent body yields the expected triple, is not flagged, and sums up."""
    wire_format, (body, expected) = case
    usage = parse_usage(wire_format, body)
    got = (
        usage.input_tokens_total,
        usage.uncached_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )
    assert got == expected
    assert not usage.inconsistent, usage.inconsistency
    _assert_invariant(usage)
    if expected[0] is not None and expected[1] is not None and expected[2] is not None:
        assert (expected[1] + expected[2] + (expected[3] or 0)) == expected[0]


_ANY_FIELDS: dict[str, tuple[str, ...]] = {
    "anthropic": ("cache_read_input_tokens", "cache_creation_input_tokens"),
    "bedrock-converse": ("cacheReadInputTokens", "cacheWriteInputTokens"),
    "openai-chat": (),
    "openai-compatible": ("prompt_cache_hit_tokens", "cached_tokens"),
    "openai-responses": (),
    "gemini": ("cachedContentTokenCount", "candidatesTokenCount", "thoughtsTokenCount"),
    "deepseek": ("prompt_cache_hit_tokens", "prompt_cache_miss_tokens"),
    "llama-cpp": (),
}
_DETAILS = {
    "openai-chat": "prompt_tokens_details",
    "openai-compatible": "prompt_tokens_details",
    "openai-responses": "input_tokens_details",
    "deepseek": "prompt_tokens_details",
    "llama-cpp": "prompt_tokens_details",
}
_REQUIRED = {
    "anthropic": "input_tokens",
    "bedrock-converse": "inputTokens",
    "openai-chat": "prompt_tokens",
    "openai-compatible": "prompt_tokens",
    "openai-responses": "input_tokens",
    "gemini": "promptTokenCount",
    "deepseek": "prompt_tokens",
    "llama-cpp": "prompt_tokens",
}


@st.composite
def arbitrary_case(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    wire_format = draw(st.sampled_from(sorted(_REQUIRED)))
    body: dict[str, Any] = {_REQUIRED[wire_format]: draw(counts)}
    for key in _ANY_FIELDS[wire_format]:
        _put(body, key, _maybe(draw, draw(counts)))
    details_key = _DETAILS.get(wire_format)
    if details_key is not None:
        details: dict[str, Any] = {}
        _put(details, "cached_tokens", _maybe(draw, draw(counts)))
        _put(details, "cache_write_tokens", _maybe(draw, draw(counts)))
        body[details_key] = details
    return wire_format, body


@given(arbitrary_case())
def test_arbitrary_reports_are_either_consistent_or_flagged(
    case: tuple[str, dict[str, Any]],
) -> None:
    """Any well-typed body parses; whenever all parts are known and unflagged, they sum up."""
    wire_format, body = case
    usage = parse_usage(wire_format, body)
    _assert_invariant(usage)
    known = (usage.input_tokens_total, usage.uncached_tokens, usage.cache_read_tokens)
    if None not in known and not usage.inconsistent:
        assert (usage.uncached_tokens or 0) + (usage.cache_read_tokens or 0) + (
            usage.cache_write_tokens or 0
        ) == usage.input_tokens_total
