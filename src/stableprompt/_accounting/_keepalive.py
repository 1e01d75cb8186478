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
from ._spill import SpillMap

__all__ = ["KeepAliveTally", "KeepAliveTotals", "is_keepalive", "keepalive_totals"]


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
    tally = KeepAliveTally(price=price)
    for record in records:
        tally.add(record)
    return tally.totals()


class KeepAliveTally:
    """:func:`keepalive_totals` one record at a time (a streaming report holds no ping):
    :meth:`add` each record, then :meth:`totals`, then :meth:`close`.

    Args:
        price: Price the pings (else ``usd`` is ``None``).
        cap: Session ids that had a ping kept in memory (``None``: all); the rest are moved
            to a temporary file (:class:`~._spill.SpillMap`: ``stableprompt report``, a
            session count that does not grow memory with the ledger).

    Raises:
        ConfigurationError: From :meth:`add`, when the temporary file fails
            (``report-spill-failed``).
    """

    def __init__(self, *, price: bool = True, cap: int | None = None) -> None:
        self._price = price
        self._totals = KeepAliveTotals()
        self._sessions: SpillMap[str, bool] = SpillMap(
            cap, encode=_seen_bytes, decode=_seen)
        self._session_count = 0
        self._pricing = Pricing(source=genai_prices_version() or "genai-prices not installed")
        self._notes: dict[str, None] = {}
        self._usd = 0.0
        self._priced = 0

    def add(self, record: UsageRecord) -> None:
        """Count ``record`` when it is a ping (:func:`is_keepalive`); skip it otherwise."""
        if not is_keepalive(record):
            return
        totals = self._totals
        totals.calls += 1
        session = record.session_id or record.record_id
        if self._sessions.get(session) is None:  # its first ping
            self._sessions[session] = True
            self._session_count += 1
        if record.status_code is None or not 200 <= record.status_code < 300:
            totals.failed += 1
        totals.input_tokens += record.input_tokens_total or 0
        totals.cache_read_tokens += record.cache_read_tokens or 0
        totals.cache_write_tokens += record.cache_write_tokens or 0
        totals.output_tokens += record.output_tokens or 0
        if not self._price:
            return
        cost = price_record(record, self._pricing, self._notes)
        if cost.usd is None or cost.gaps:
            totals.unpriced += 1
        if cost.usd is not None:
            self._usd += cost.usd
            self._priced += 1

    def totals(self) -> KeepAliveTotals:
        """The totals of the pings added so far (a copy)."""
        t = self._totals
        return KeepAliveTotals(
            calls=t.calls, sessions=self._session_count, input_tokens=t.input_tokens,
            cache_read_tokens=t.cache_read_tokens, cache_write_tokens=t.cache_write_tokens,
            output_tokens=t.output_tokens,
            usd=self._usd if self._price and self._priced else None, unpriced=t.unpriced,
            failed=t.failed, notes=list(self._notes))

    def close(self) -> None:
        """Delete the temporary file of session ids, if any (idempotent); :meth:`totals`
        still answers."""
        self._sessions.close()


def _seen_bytes(_: bool) -> bytes:
    """A session id's value in the file (it had a ping): one byte."""
    return b"\x01"


def _seen(_: bytes) -> bool:
    return True
