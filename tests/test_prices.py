"""Tests for the unit prices (USD per token) looked up once per provider, model and day."""

from __future__ import annotations

from datetime import date

import pytest

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
