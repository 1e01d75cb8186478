"""Tests for the normalized CacheUsage record (src/stableprompt/_usage.py)."""

from __future__ import annotations

import pydantic
import pytest

import stableprompt
from stableprompt import CacheUsage


def _usage(**fields: object) -> CacheUsage:
    return CacheUsage.model_validate({"wire_format": "test", **fields})


def test_hit_rate_is_read_over_total() -> None:
    """hit_rate divides cache reads by the inclusive total."""
    usage = _usage(
        input_tokens_total=2006, uncached_tokens=86, cache_read_tokens=1920, cache_write_tokens=0
    )
    assert usage.hit_rate == 1920 / 2006
    assert not usage.inconsistent
    assert usage.inconsistency is None


def test_hit_rate_unknown_when_read_or_total_unknown_or_zero() -> None:
    """hit_rate is None when a count is unknown or the total is 0, never a made-up 0.0."""
    assert _usage(input_tokens_total=100).hit_rate is None
    assert _usage(cache_read_tokens=10).hit_rate is None
    assert _usage(input_tokens_total=0, cache_read_tokens=0).hit_rate is None


def test_unknown_has_no_counts_and_keeps_reason() -> None:
    """CacheUsage.unknown leaves every count None and records why."""
    usage = CacheUsage.unknown("openai-chat", "stream interrupted")
    assert usage.is_unknown
    assert usage.unknown_reason == "stream interrupted"
    assert usage.wire_format == "openai-chat"
    assert usage.raw == {}
    assert usage.hit_rate is None
    assert not usage.inconsistent


def test_cached_more_than_total_is_flagged_not_clamped() -> None:
    """More cached than total is flagged, and the negative remainder is kept as reported."""
    usage = _usage(input_tokens_total=100, uncached_tokens=-20, cache_read_tokens=120)
    assert usage.inconsistent
    assert usage.uncached_tokens == -20
    reason = usage.inconsistency or ""
    assert "uncached_tokens is negative (-20)" in reason
    assert "cache_read + cache_write (120) exceed input_tokens_total (100)" in reason
    assert usage.hit_rate == 1.2


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param(
            {"input_tokens_total": 100, "uncached_tokens": 10, "cache_read_tokens": 50,
             "cache_write_tokens": 30},
            "uncached + cache_read + cache_write (90) != input_tokens_total (100)",
            id="parts-not-summing-to-total",
        ),
        pytest.param(
            {"input_tokens_total": 1000, "uncached_tokens": 0, "cache_read_tokens": 0,
             "cache_write_tokens": 1000, "cache_write_5m_tokens": 1000,
             "cache_write_1h_tokens": 1000},
            "TTL split 5m + 1h (2000) does not match cache_write (1000)",
            id="ttl-split-not-summing-to-write",
        ),
        pytest.param(
            {"inconsistency_notes": ("hit + miss (10) != prompt_tokens (11)",)},
            "hit + miss (10) != prompt_tokens (11)",
            id="parser-notes",
        ),
    ],
)
def test_inconsistency_names_the_contradiction(fields: dict[str, object], expected: str) -> None:
    """Parts not summing to the total, a 5m + 1h split that differs from cache_write_tokens,
    and parser notes are each named in the inconsistency."""
    assert _usage(**fields).inconsistency == expected


def test_partial_ttl_split_exceeding_write_is_flagged() -> None:
    """A single known TTL part larger than the write total is flagged; a smaller one is not."""
    over = _usage(cache_write_tokens=10, cache_write_1h_tokens=11)
    under = _usage(cache_write_tokens=10, cache_write_1h_tokens=9)
    assert over.inconsistent
    assert not under.inconsistent


def test_model_is_frozen() -> None:
    """CacheUsage cannot be mutated after construction."""
    usage = _usage(input_tokens_total=1)
    with pytest.raises(pydantic.ValidationError):
        usage.input_tokens_total = 2


def test_extra_fields_are_forbidden() -> None:
    """An unknown field is rejected rather than silently dropped."""
    with pytest.raises(pydantic.ValidationError, match="extra"):
        _usage(cached_tokens=5)


@pytest.mark.parametrize("bad", ["12", 12.0, True])
def test_counts_are_not_coerced(bad: object) -> None:
    """Strings, floats and booleans are not coerced into token counts."""
    with pytest.raises(pydantic.ValidationError):
        _usage(input_tokens_total=bad)


def test_json_round_trip_is_exact() -> None:
    """A dumped CacheUsage validates back to an equal record (ledger round trip)."""
    usage = _usage(
        input_tokens_total=188107,
        uncached_tokens=21,
        cache_read_tokens=0,
        cache_write_tokens=188086,
        cache_write_5m_tokens=188086,
        cache_write_1h_tokens=0,
        output_tokens=393,
        raw={"input_tokens": 21, "nested": {"a": [1, 2]}},
        inconsistency_notes=("note",),
    )
    assert CacheUsage.model_validate_json(usage.model_dump_json()) == usage
    assert CacheUsage.model_validate(usage.model_dump()) == usage


def test_exported_from_the_top_level() -> None:
    """CacheUsage, parse_usage and parse_stream are importable from stableprompt."""
    assert stableprompt.CacheUsage is CacheUsage
    for name in ("CacheUsage", "parse_usage", "parse_stream"):
        assert name in stableprompt.__all__
    usage = stableprompt.parse_usage("openai-chat", {"prompt_tokens": 5})
    assert usage.input_tokens_total == 5


def test_usage_record_mirrors_usage_fields() -> None:
    """UsageRecord carries CacheUsage's token counts under the same names, in the same order
    (the one list, ``USAGE_FIELDS``), and the ledger stores each as a column."""
    from stableprompt._ledger._schema import COLUMNS
    from stableprompt._usage import USAGE_FIELDS

    assert tuple(n for n in CacheUsage.model_fields if n.endswith("_tokens")
                                 or n == "input_tokens_total") == USAGE_FIELDS
    names = list(stableprompt.UsageRecord.model_fields)
    start = names.index(USAGE_FIELDS[0])
    assert tuple(names[start:start + len(USAGE_FIELDS)]) == USAGE_FIELDS
    assert set(USAGE_FIELDS) <= set(COLUMNS)
