"""Tests for the unit prices (USD per token) looked up once per provider, model and day."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt._economics._prices import unit_prices

pytest.importorskip("genai_prices")

DAY = date(2026, 3, 1)


def test_a_tiered_model_is_priced_at_its_base_tier() -> None:
    """Claude Sonnet 4.5 costs $3 / $0.30 / $3.75 / $6 / $15 per million tokens (input, cache
    read, 5-minute write, 1-hour write, output) below 200,000 input tokens; the lookup must
    not price the long-context tier ($6 input) a million-token block falls in."""
    prices = unit_prices("anthropic", "claude-sonnet-4-5", DAY)
    assert prices is not None
    assert prices.input == pytest.approx(3e-6)
    assert prices.cache_read == pytest.approx(0.3e-6)
    assert prices.cache_write == pytest.approx(3.75e-6)
    assert prices.cache_write_1h == pytest.approx(6e-6)
    assert prices.output == pytest.approx(15e-6)
    assert prices.source.startswith("genai-prices ") and prices.source.endswith("(2026-03-01)")


def test_an_unknown_model_has_no_price() -> None:
    """A model genai-prices does not know is None (never a $0)."""
    assert unit_prices("anthropic", "claude-no-such-model", DAY) is None


def test_the_tier_start_is_read_from_genai_prices() -> None:
    """Claude Sonnet 4.5's long-context tier starts at 200,000 input tokens (genai-prices'
    TieredPrices); Claude Sonnet 5 has none."""
    tiered = unit_prices("anthropic", "claude-sonnet-4-5", DAY)
    flat = unit_prices("anthropic", "claude-sonnet-5", DAY)
    assert tiered is not None and flat is not None
    assert tiered.tier_start == 200_000 and flat.tier_start is None
    assert tiered.linear_for(199_999) and not tiered.linear_for(200_000)


MODELS = [("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-opus-5-5"),
          ("openai", "gpt-5.6"), ("openai", "gpt-5.2"), ("gemini", "gemini-2.5-pro"),
          ("bedrock", "anthropic.claude-sonnet-4-6")]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(MODELS), st.integers(0, 400_000), st.floats(0, 1), st.floats(0, 1),
       st.floats(0, 1), st.integers(0, 20_000))
def test_a_call_is_priced_as_genai_prices_prices_it(
        model: tuple[str, str], total: int, read_share: float, write_share: float,
        one_hour_share: float, output: int) -> None:
    """The report's price of a call (base-tier rates applied in bulk below the model's
    first tier, genai-prices itself from there on) equals genai-prices' price of that call,
    long-context tiers included."""
    from genai_prices import Usage, calc_price

    from stableprompt import UsageRecord
    from stableprompt._accounting._pricing import Pricing, price_record

    provider, name = model
    read = int(total * read_share)
    write = int((total - read) * write_share)
    write_1h = int(write * one_hour_share)
    record = UsageRecord(wire_format="anthropic", provider=provider, model=name,
                         ts_utc=datetime(2026, 3, 1, 9, tzinfo=UTC), input_tokens_total=total,
                         cache_read_tokens=read, cache_write_tokens=write,
                         cache_write_1h_tokens=write_1h, output_tokens=output)
    ours = price_record(record, Pricing(source="genai-prices"), {}).usd
    usage = {"input_tokens": total, "cache_read_tokens": read, "cache_write_tokens": write,
             "output_tokens": output}
    if write_1h:
        usage["cache_write_1h_tokens"] = write_1h
    provider_id = {"gemini": "google", "bedrock": "aws"}.get(provider, provider)
    theirs = float(calc_price(Usage(**usage), name, provider_id=provider_id,
                              genai_request_timestamp=datetime(2026, 3, 1, 12)).total_price)
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([*MODELS, ("anthropic", "claude-no-such-model"), ("anthropic", "")]),
       st.integers(0, 400_000), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1),
       st.one_of(st.none(), st.integers(0, 20_000)), st.integers(0, 400_000),
       st.integers(0, 400_000),
       st.sampled_from([None, {"server_tool_use": {"web_search_requests": 2}},
                        {"server_tool_use": {"web_fetch_requests": 1}},
                        {"server_tool_use": {"new_tool": 1}},
                        {"server_tool_use": {"web_search_requests": "2"}}]))
def test_splits_priced_at_once_equal_each_priced_alone(
        model: tuple[str, str], total: int, read_share: float, write_share: float,
        one_hour_share: float, output: int | None, ceiling: int, lost: int,
        usage_raw: dict[str, object] | None) -> None:
    """``price_splits`` (the call's unit prices found once, applied to its cost as reported,
    uncached, at its ceiling and had it read what it lost: the report's four cost columns)
    gives exactly ``price_record`` and ``price_call`` of each split alone, for every model
    (long-context tiers, unknown models, no model), server-tool fees and unknown outputs."""
    from stableprompt import UsageRecord
    from stableprompt._accounting._pricing import (
        Pricing,
        TokenSplit,
        price_call,
        price_record,
        price_splits,
    )

    provider, name = model
    read = int(total * read_share)
    write = int((total - read) * write_share)
    write_1h = int(write * one_hour_share)
    record = UsageRecord(wire_format="anthropic", provider=provider, model=name or None,
                         ts_utc=datetime(2026, 3, 1, 9, tzinfo=UTC), input_tokens_total=total,
                         cache_read_tokens=read, cache_write_tokens=write,
                         cache_write_1h_tokens=write_1h, output_tokens=output,
                         usage_raw=usage_raw)  # type: ignore[arg-type]
    split = TokenSplit.of(record)
    others = (split.uncached(), split.reading(ceiling), split.reading(read + lost),
              TokenSplit(total + 1, 0, 0))  # another total: priced alone
    pricing_a, notes_a = Pricing(source="genai-prices"), dict[str, None]()
    pricing_b, notes_b = Pricing(source="genai-prices"), dict[str, None]()
    price, usd = price_splits(record, pricing_a, notes_a, split, others)
    alone = price_record(record, pricing_b, notes_b, split)
    assert price == alone
    expected = [None if alone.usd is None else price_call(record, pricing_b, notes_b, o)
                for o in others]
    assert usd == expected  # exactly: the same arithmetic on the same rates
    assert (pricing_a, list(notes_a)) == (pricing_b, list(notes_b))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([*MODELS, ("anthropic", "claude-no-such-model"), ("anthropic", "")]),
       st.one_of(st.none(), st.integers(0, 400_000)), st.floats(0, 1.2), st.floats(0, 1.2),
       st.floats(0, 1.2), st.one_of(st.none(), st.integers(-5, 20_000)),
       st.lists(st.integers(-10, 400_000), max_size=2), st.booleans(),
       st.sampled_from([None, {"server_tool_use": {"web_search_requests": 2}},
                        {"server_tool_use": {"new_tool": 1}}]))
def test_readings_priced_as_their_splits(
        model: tuple[str, str], total: int | None, read_share: float, write_share: float,
        one_hour_share: float, output: int | None, reads: list[int], reads_known: bool,
        usage_raw: dict[str, object] | None) -> None:
    """``price_readings`` (the report's call: no split object per variant) gives exactly
    ``price_splits`` of the reported split with the uncached split and ``reading(r)`` of each
    read as ``others``: the same price, USD to the bit, dates and notes, for every model
    (long-context tiers, unknown models, no model), server-tool fees, unknown usage, unknown
    reads, parts that do not add up (a negative part) and negative outputs."""
    from stableprompt import UsageRecord
    from stableprompt._accounting._pricing import (
        Pricing,
        TokenSplit,
        price_readings,
        price_splits,
    )

    provider, name = model
    base = total or 0
    read = int(base * read_share)  # up to 1.2x: some splits do not add up
    write = int(max(base - read, 0) * write_share) if write_share <= 1 else int(base * 0.3)
    write_1h = int(write * one_hour_share)
    record = UsageRecord(wire_format="anthropic", provider=provider, model=name or None,
                         ts_utc=datetime(2026, 3, 1, 9, tzinfo=UTC), input_tokens_total=total,
                         cache_read_tokens=read if reads_known else None,
                         cache_write_tokens=write, cache_write_1h_tokens=write_1h,
                         output_tokens=output, usage_raw=usage_raw)  # type: ignore[arg-type]
    split = TokenSplit.of(record)
    others = (split.uncached(), *(split.reading(r) for r in reads))
    pricing_a, notes_a = Pricing(source="genai-prices"), dict[str, None]()
    pricing_b, notes_b = Pricing(source="genai-prices"), dict[str, None]()
    got = price_readings(record, pricing_a, notes_a, tuple(reads))
    assert got == price_splits(record, pricing_b, notes_b, split, others)
    assert (pricing_a, list(notes_a)) == (pricing_b, list(notes_b))
