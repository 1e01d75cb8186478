"""The report's totals from the ledger's rollups (``_ledger/_rollups.py``), priced in bulk.

:func:`summarize_rollups` sums rollup buckets (UTC hour x provider x model x scenario x
verdict) into totals per period (``"hour"`` or ``"day"``) x provider x model x scenario,
with the same token rules as the row-level report (``_calls.exclusion``: only included
calls in token sums and hit rates, each exclusion counted), so its token sums equal
:func:`~._summary.summarize_stream`'s over the same rows (``tests/test_rollups.py``).

Costs (USD) are priced at read time, once per bucket from its sums, with the model's unit
prices for the bucket's date (``_economics._prices.unit_prices``, looked up once per
(provider, model, date)). Exact where the per-call price is linear (genai-prices: linear in
each token count within a tier; the tier is chosen per call by its input total): a bucket
whose priced calls all fall in one tier of its model (``priced_min_input_tokens`` ..
``priced_max_input_tokens``, ``UnitPrices.same_tier``) is priced at that tier's rates
(``tier_prices``, long-context tiers included); one whose calls straddle a threshold, or
whose model has a price per request, is not priced from sums: its calls count as cost
unknown (with a note), never a wrong number; the row-level report prices them call by
call. Web-search fees are priced from the summed count at genai-prices' rate
(:func:`~._pricing.fee_usd`). The rest follows the row-level report's cost
rules: a call without usage, without cache reads or whose usage does not add up has no cost
(unknown); an unknown output count or server-tool fee makes its cost a lower bound (counted
in ``cost_unknown_calls`` as there). What rows alone give (ceilings, lost tokens, causes,
sessions) is not in rollups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from .._economics._prices import tier_prices, unit_prices
from .._ledger._rollups import RollupRow
from ._pricing import Pricing, fee_usd, genai_prices_version
from ._totals import VERDICTS, CallSums

__all__ = ["BUCKETS", "RollupSummary", "RollupTotals", "summarize_rollups"]

BUCKETS = ("hour", "day")
"""The periods :func:`summarize_rollups` groups by."""

_TOKENS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
           "cache_write_1h_tokens", "output_tokens", "predicted_cache_read_tokens")
_COUNTS = ("calls", "failed_calls", "unanalysed", "unknown_usage", "unknown_reads", "suspect",
           "inconsistent")


@dataclass
class RollupTotals(CallSums):
    """Sums over rollup buckets (tokens unless stated; what each means: ``_totals.Totals``).

    Attributes:
        calls: Calls. ``failed_calls``: of those, calls that failed (an error class).
        unanalysed, unknown_usage, unknown_reads, suspect, inconsistent: Calls excluded
            from token sums and rates, per reason.
        input_tokens: Input tokens of the included calls, inclusive of cache reads and
            writes; ``cache_read_tokens``, ``cache_write_tokens`` (of which
            ``cache_write_5m_tokens`` / ``cache_write_1h_tokens`` where the provider split
            them), ``output_tokens``, ``predicted_cache_read_tokens`` of the same calls.
        verdicts: Calls per verdict.
        cost_usd: USD of the priced calls (a lower bound when ``cost_unknown_calls``);
            ``None`` when no call could be priced.
        cost_uncached_usd: The same calls priced with no caching at all (USD).
        priced_calls: Calls with a known cost (whole or a lower bound).
        cost_unknown_calls: Calls whose cost is unknown or only a lower bound.
    """

    calls: int = 0
    failed_calls: int = 0
    unanalysed: int = 0
    unknown_usage: int = 0
    unknown_reads: int = 0
    suspect: int = 0
    inconsistent: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    output_tokens: int = 0
    predicted_cache_read_tokens: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    cost_usd: float | None = 0.0
    cost_uncached_usd: float | None = 0.0
    priced_calls: int = 0
    cost_unknown_calls: int = 0

    def add(self, row: RollupRow, cost: _BucketCost | None) -> None:
        """Add one bucket (``cost``: its price, ``None`` when costs are not asked for)."""
        sums = row.sums
        for name in (*_COUNTS, *_TOKENS):
            setattr(self, name, getattr(self, name) + sums[name])
        verdict = row.verdict if row.verdict in self.verdicts else "unknown"
        self.verdicts[verdict] += sums["calls"]
        if cost is None:
            self.cost_usd = self.cost_uncached_usd = None
            return
        self.cost_unknown_calls += cost.unknown_calls
        if not cost.priced_calls:
            if cost.unknown_calls and not self.priced_calls:  # nothing known yet
                self.cost_usd = self.cost_uncached_usd = None
            return
        usd = 0.0 if not self.priced_calls or self.cost_usd is None else self.cost_usd
        uncached = (0.0 if not self.priced_calls or self.cost_uncached_usd is None
                    else self.cost_uncached_usd)
        self.priced_calls += cost.priced_calls
        self.cost_usd = usd + cost.usd
        self.cost_uncached_usd = uncached + cost.uncached_usd

    def to_json(self) -> dict[str, Any]:
        """Every attribute, plus ``hit_rate`` and ``excluded`` (rates and USD rounded to 6
        digits)."""
        return {
            **{name: getattr(self, name) for name in (*_COUNTS, *_TOKENS)},
            "excluded": self.excluded, "hit_rate": _round(self.hit_rate),
            "verdicts": dict(self.verdicts), "cost_usd": _round(self.cost_usd),
            "cost_uncached_usd": _round(self.cost_uncached_usd),
            "priced_calls": self.priced_calls, "cost_unknown_calls": self.cost_unknown_calls,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


@dataclass(frozen=True, slots=True)
class _BucketCost:
    usd: float
    uncached_usd: float
    priced_calls: int
    unknown_calls: int


def _price_bucket(row: RollupRow, pricing: Pricing, notes: dict[str, None]) -> _BucketCost:
    """One bucket's price from its sums (module docstring)."""
    s = row.sums
    unpriceable = s["calls"] - s["unanalysed"] - s["priced_calls"]  # no usage, reads, ...
    priced = s["priced_calls"]
    if not priced:
        return _BucketCost(0.0, 0.0, 0, unpriceable)
    unknown = _BucketCost(0.0, 0.0, 0, unpriceable + priced)
    if pricing.source.startswith("genai-prices not"):
        notes["genai-prices is not installed: costs omitted"] = None
        return unknown
    if not row.provider or not row.model:
        notes["calls without a model or provider name: cost omitted"] = None
        return unknown
    day = date.fromisoformat(row.hour[:10])
    rates = unit_prices(row.provider, row.model, day)
    if rates is None:
        notes[f"genai-prices has no price for model {row.model!r} at provider "
              f"{row.provider!r}: cost omitted"] = None
        return unknown
    low, high = s["priced_min_input_tokens"], s["priced_max_input_tokens"]
    tier = tier_prices(row.provider, row.model, day, high) if rates.same_tier(low, high) else None
    if tier is None:
        notes[f"{row.model!r}: an hour holds calls on both sides of a long-context price "
              "threshold (or the model has a price per request), which token sums cannot "
              "price exactly: its cost is omitted here; the row-level report prices them "
              "call by call"] = None
        return unknown
    rates = tier
    total, read = s["priced_input_tokens"], s["priced_cache_read_tokens"]
    write, write_1h = s["priced_cache_write_tokens"], s["priced_cache_write_1h_tokens"]
    output = s["priced_output_tokens"]
    usd = rates.usd(total, read, write, write_1h, output)
    uncached = rates.usd(total, 0, 0, 0, output)
    partial = s["priced_partial_calls"]
    if s["web_search_requests"]:
        fee = fee_usd(row.provider, row.model, day, "web_search_requests",
                      s["web_search_requests"], notes)
        if fee is None:
            partial += s["web_search_calls"]  # at most: a call may be partial twice over
        else:
            usd += fee
            uncached += fee
    if pricing.first_date is None or day < pricing.first_date:
        pricing.first_date = day
    if pricing.last_date is None or day > pricing.last_date:
        pricing.last_date = day
    return _BucketCost(usd, uncached, priced, unpriceable + min(partial, priced))


@dataclass
class RollupSummary:
    """Totals from rollups.

    Attributes:
        bucket: ``"hour"`` or ``"day"``.
        groups: ``(period, provider, model, scenario)`` -> totals, in period then key
            order; ``period`` is ``"YYYY-MM-DDTHH"`` or ``"YYYY-MM-DD"`` (UTC), and an
            unknown provider, model or scenario is ``""``.
        overall: Totals of every bucket.
        pricing: How costs were computed (dates priced, notes).
        buckets: Rollup rows read.
    """

    bucket: str
    groups: dict[tuple[str, str, str, str], RollupTotals]
    overall: RollupTotals
    pricing: Pricing
    buckets: int

    def to_json(self) -> dict[str, Any]:
        """``{"bucket", "buckets", "overall", "groups": [{period, provider, model, scenario,
        ...totals}], "pricing"}``."""
        return {
            "bucket": self.bucket, "buckets": self.buckets, "overall": self.overall.to_json(),
            "groups": [{"period": period, "provider": provider or None, "model": model or None,
                        "scenario": scenario or None, **totals.to_json()}
                       for (period, provider, model, scenario), totals in self.groups.items()],
            "pricing": self.pricing.to_json(),
        }


def summarize_rollups(rows: list[RollupRow], *, bucket: str = "day",
                      price: bool = True) -> RollupSummary:
    """Sum rollup rows per ``bucket`` period x provider x model x scenario.

    Args:
        rows: :func:`~stableprompt._ledger._rollups.rollup_rows` of one or more ledgers.
        bucket: ``"hour"`` or ``"day"``.
        price: Price the buckets (module docstring); ``False``: every cost is ``None``.

    Raises:
        ValueError: ``bucket`` is not one of :data:`BUCKETS`.
    """
    if bucket not in BUCKETS:
        raise ValueError(f"bucket must be one of {', '.join(BUCKETS)}, not {bucket!r}")
    width = 13 if bucket == "hour" else 10
    pricing = Pricing(source=genai_prices_version() or "genai-prices not installed")
    notes: dict[str, None] = {}
    overall = RollupTotals()
    groups: dict[tuple[str, str, str, str], RollupTotals] = {}
    for row in sorted(rows, key=lambda r: (r.hour, r.provider, r.model, r.scenario)):
        cost = _price_bucket(row, pricing, notes) if price else None
        key = (row.hour[:width], row.provider, row.model, row.scenario)
        totals = groups.get(key)
        if totals is None:
            totals = groups[key] = RollupTotals()
        totals.add(row, cost)
        overall.add(row, cost)
    pricing.notes = list(notes)
    return RollupSummary(bucket, groups, overall, pricing, len(rows))
