"""Keep-alive calls in a ledger: how many, what they read and what they cost.

A keep-alive ping (:class:`~stableprompt.KeepAliveScheduler`, ``_client._keepalive``) is
recorded like any call, with ``verdict_detail["keepalive"] = true`` (and ``keepalive_ping``,
its number in its idle gap). :func:`keepalive_totals` counts those rows and prices them as the
report prices every call (:func:`~._pricing.price_record`: the call's own date, provider and
model, cache reads and writes at their rates).

A ping reads almost all of its input from the cache, so counted among the real calls it
would raise the hit rate without any real request being served faster: the report should
show pings on their own line and leave them out of the hit rate and the ceiling (their cost
belongs in the total spent, as the price of the reads they kept alive).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._ledger._usage_record import UsageRecord
from ._pricing import Pricing, genai_prices_version, price_record

__all__ = ["KeepAliveTotals", "is_keepalive", "keepalive_totals"]


def is_keepalive(record: UsageRecord) -> bool:
    """Whether ``record`` is a keep-alive ping (``verdict_detail["keepalive"] is True``)."""
    return record.verdict_detail.get("keepalive") is True


@dataclass
class KeepAliveTotals:
    """The keep-alive pings of a set of records.

    Attributes:
        calls: Pings recorded.
        sessions: Sessions (conversations) that had at least one.
        input_tokens: Their input tokens (inclusive), where known.
        cache_read_tokens: Of those, read from the cache.
        cache_write_tokens: Of those, written (a ping that found its entry gone rewrites it).
        output_tokens: Their output tokens.
        usd: What they cost (USD); ``None`` when none could be priced or pricing was not
            asked; a lower bound when ``unpriced`` > 0.
        unpriced: Pings whose price is unknown (no usage, unknown model, no genai-prices).
        failed: Pings without a 2xx answer (an error or a cut).
        notes: Why some could not be priced, one line each.
    """

    calls: int = 0
    sessions: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    usd: float | None = None
    unpriced: int = 0
    failed: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"calls", "sessions", "input_tokens", "cache_read_tokens", "cache_write_tokens",
        "output_tokens", "usd", "unpriced", "failed", "notes"}`` (USD to 6 digits)."""
        return {"calls": self.calls, "sessions": self.sessions,
                "input_tokens": self.input_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens,
                "output_tokens": self.output_tokens,
                "usd": None if self.usd is None else round(self.usd, 6),
                "unpriced": self.unpriced, "failed": self.failed, "notes": list(self.notes)}


def keepalive_totals(records: Iterable[UsageRecord], *, price: bool = True) -> KeepAliveTotals:
    """Count and price the keep-alive pings among ``records`` (module docstring).

    Args:
        records: Ledger records, any order (other calls are skipped).
        price: Price the pings with genai-prices (else ``usd`` is ``None``).

    Returns:
        :class:`KeepAliveTotals`; all zeros (``usd`` ``None``) when there is no ping.
    """
    totals = KeepAliveTotals()
    sessions: set[str] = set()
    pricing = Pricing(source=genai_prices_version() or "genai-prices not installed")
    notes: dict[str, None] = {}
    usd = 0.0
    priced = 0
    for record in records:
        if not is_keepalive(record):
            continue
        totals.calls += 1
        sessions.add(record.session_id or record.record_id)
        if record.status_code is None or not 200 <= record.status_code < 300:
            totals.failed += 1
        totals.input_tokens += record.input_tokens_total or 0
        totals.cache_read_tokens += record.cache_read_tokens or 0
        totals.cache_write_tokens += record.cache_write_tokens or 0
        totals.output_tokens += record.output_tokens or 0
        if not price:
            continue
        cost = price_record(record, pricing, notes)
        if cost.usd is None or cost.gaps:
            totals.unpriced += 1
        if cost.usd is not None:
            usd += cost.usd
            priced += 1
    totals.sessions = len(sessions)
    totals.usd = usd if price and priced else None
    totals.notes = list(notes)
    return totals
