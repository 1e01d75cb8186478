"""Unit prices of one model on one day (USD per token), looked up once, applied in bulk.

:func:`unit_prices` asks `genai-prices <https://pypi.org/project/genai-prices/>`_ for the price
of a block of 1,000 tokens of each kind (fresh input, cache read, cache write at the default TTL,
cache write at 1 hour, output) for a provider's model at a date, and divides. Prices are linear
within a tier: what-if replays (``_accounting._what_if``) and the compaction advice
(``Conversation.compaction_advice``) multiply token counts by these. Long-context tiers (e.g.
Claude Sonnet 4.5 above 200,000 input tokens) are not modelled here (the base tier is
priced): the report's exact per-call price (``_accounting._pricing.price_record``) passes
each call's own totals to genai-prices.

A write at a TTL genai-prices does not price (OpenAI's 12-hour write, 2.5x) is priced as the
fresh-input price times the TTL's multiplier in :class:`~stableprompt.CacheRules`
(``write_multipliers``, dated data with its source): :meth:`UnitPrices.write`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache

__all__ = ["GENAI_PROVIDERS", "UnitPrices", "tier_prices", "unit_prices"]

GENAI_PROVIDERS: Mapping[str, str] = {"gemini": "google", "bedrock": "aws", "xai": "x-ai"}
"""stableprompt provider names that genai-prices spells differently (its ``provider_id``)."""

_BLOCK = 1_000
"""Tokens priced per lookup (then divided): below every long-context tier threshold
(Claude Sonnet 4.5 and Gemini 2.5 Pro: above 200,000 input tokens, Gemini 1.5: 128,000), so
the lookup gives the base tier's rate. A million tokens would price the upper tier (Claude
Sonnet 4.5 input: $6 instead of $3 per million)."""


@dataclass(frozen=True, slots=True)
class UnitPrices:
    """USD per token of one model on one day.

    Attributes:
        input: A fresh (uncached) input token.
        cache_read: A token read from the prefix cache.
        cache_write: A token written at the provider's default TTL (Anthropic 5 min, OpenAI
            GPT-5.6+ 30 min); equals ``input`` where writes are not charged extra.
        cache_write_1h: A token written with Anthropic's 1-hour TTL.
        output: An output token.
        source: ``"genai-prices <version>"`` and the date priced.
        tier_start: Input tokens (inclusive total) from which some price of the model changes
            tier (genai-prices' ``TieredPrices``; Claude Sonnet 4.5: 200,000), ``None`` when
            none does; ``0`` when the model has a price these rates do not capture (a fee per
            request): then they hold for no call (:meth:`linear_for`).
    """

    input: float
    cache_read: float
    cache_write: float
    cache_write_1h: float
    output: float
    source: str
    tier_start: int | None = None
    tier_starts: tuple[int, ...] = ()
    """Every tier threshold of the model's prices (input tokens, ascending; genai-prices
    picks a tier when a call's input total is above its start): :meth:`same_tier`."""

    def same_tier(self, low: int, high: int) -> bool:
        """Calls whose input totals all lie in ``low..high`` are priced at one tier (no
        threshold between them; a price per request, ``tier_start == 0``, never is)."""
        if self.tier_start == 0:
            return False
        return low == high or all(s < low or s > high for s in self.tier_starts)

    def linear_for(self, total: int) -> bool:
        """These base-tier rates price a call of ``total`` input tokens exactly (below
        :attr:`tier_start`)."""
        return self.tier_start is None or total < self.tier_start

    def usd(self, total: int, read: int, write: int, write_1h: int, output: int) -> float:
        """USD of a call: ``total`` input tokens (inclusive) of which ``read`` read and
        ``write`` written (``write_1h`` of those at 1 hour), and ``output`` output tokens,
        at these rates (as genai-prices splits them: the uncached rest at ``input``)."""
        return ((total - read - write) * self.input + read * self.cache_read
                + (write - write_1h) * self.cache_write + write_1h * self.cache_write_1h
                + output * self.output)

    def write(self, ttl_label: str | None, multipliers: Mapping[str, float]) -> float:
        """USD per token written at ``ttl_label`` (``"5m"``, ``"1h"``, ``"30m"``, ``"12h"``;
        ``None``: the default). genai-prices' own rate where it has one (the default TTL and
        ``"1h"``); otherwise ``input`` times ``multipliers[ttl_label]``
        (:attr:`CacheRules.write_multipliers`).

        Raises:
            KeyError: ``ttl_label`` is neither priced by genai-prices nor in ``multipliers``.
        """
        if ttl_label == "1h" and self.cache_write_1h != self.cache_write:
            return self.cache_write_1h
        default = next(iter(multipliers), None)
        if ttl_label is None or ttl_label == default:
            return self.cache_write
        return self.input * multipliers[ttl_label]


@lru_cache(maxsize=4096)
def unit_prices(provider: str, model: str, day: date) -> UnitPrices | None:
    """:class:`UnitPrices` of ``model`` at ``provider`` on ``day``, at the base tier (see
    :data:`_BLOCK`); ``None`` when genai-prices is not installed or has no price for the model
    (the caller says so: never a $0).

    Looked up once per (provider, model, day) and cached."""
    try:
        from importlib.metadata import version

        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    stamp = datetime(day.year, day.month, day.day, 12)
    provider_id = GENAI_PROVIDERS.get(provider, provider)

    tier_starts: list[int] = []
    all_starts: list[int] = []

    def cost(**tokens: int) -> float:
        usage = Usage(**tokens)
        result = calc_price(usage, model, provider_id=provider_id, genai_request_timestamp=stamp)
        if not tier_starts:
            all_starts.extend(_tier_starts(result.model_price))
            tier_starts.append(all_starts[0] if all_starts else _NO_TIER)
            if calc_price(Usage(), model, provider_id=provider_id,
                          genai_request_timestamp=stamp).total_price:
                tier_starts[0] = 0  # a price per request: not linear in tokens
        return float(result.total_price) / _BLOCK

    try:
        fresh = cost(input_tokens=_BLOCK)
        read = cost(input_tokens=_BLOCK, cache_read_tokens=_BLOCK)
        write = cost(input_tokens=_BLOCK, cache_write_tokens=_BLOCK)
        write_1h = cost(input_tokens=_BLOCK, cache_write_tokens=_BLOCK,
                        cache_write_1h_tokens=_BLOCK)
        output = cost(output_tokens=_BLOCK)
    except Exception:  # LookupError (unknown model) or a library problem: not priced
        return None
    start = tier_starts[0] if tier_starts else 0
    return UnitPrices(fresh, read, write, write_1h, output,
                      f"genai-prices {version('genai-prices')} ({day.isoformat()})",
                      None if start == _NO_TIER else start, tuple(all_starts))


_NO_TIER = -1


@lru_cache(maxsize=4096)
def tier_prices(provider: str, model: str, day: date, total: int) -> UnitPrices | None:
    """:class:`UnitPrices` of ``model`` at ``provider`` on ``day`` at the tier of a call of
    ``total`` input tokens (inclusive): genai-prices asked for calls of that total (fresh,
    read, written at the default TTL and at 1 hour) and for its output rate at that total
    (a tier prices every token of the call, output included, by the input total:
    genai-prices' ``TieredPrices``). Exact for any call priced at the same tier
    (:meth:`UnitPrices.same_tier`); ``None`` as :func:`unit_prices`, or for ``total < 1``.

    Looked up once per (provider, model, day, total) and cached."""
    base = unit_prices(provider, model, day)
    if base is None or total < 1:
        return None
    if base.tier_start is None or total <= base.tier_start:
        return base
    from genai_prices import Usage, calc_price

    stamp = datetime(day.year, day.month, day.day, 12)
    provider_id = GENAI_PROVIDERS.get(provider, provider)

    def cost(**tokens: int) -> float:
        result = calc_price(Usage(input_tokens=total, **tokens), model, provider_id=provider_id,
                            genai_request_timestamp=stamp)
        return float(result.total_price)

    try:
        fresh = cost()
        read = cost(cache_read_tokens=total)
        write = cost(cache_write_tokens=total)
        write_1h = cost(cache_write_tokens=total, cache_write_1h_tokens=total)
        output = cost(output_tokens=total) - fresh
    except Exception:  # a library problem: not priced (the caller says so)
        return None
    return UnitPrices(fresh / total, read / total, write / total, write_1h / total,
                      output / total, base.source, base.tier_start, base.tier_starts)


def _tier_starts(model_price: object) -> list[int]:
    """Every tier threshold (input tokens, ascending, once each) among a genai-prices
    ``ModelPrice``'s prices (each a number or ``TieredPrices(base, tiers=[Tier(start,
    price)])``); ``[]`` when none is tiered."""
    return sorted({int(tier.start) for value in vars(model_price).values()
                   for tier in (getattr(value, "tiers", None) or ())})
