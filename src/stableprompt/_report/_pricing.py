"""Call prices: the report's one call site of `genai-prices <https://pypi.org/project/genai-prices/>`_.

:func:`price_call` prices one :class:`~stableprompt.UsageRecord` at its own date (``ts_utc``) for
its provider and model, as reported or with its token split replaced (what the call would have
cost all uncached, at its ceiling, or had its lost tokens been read): cache reads and writes,
including the 1-hour write split, at their own rates. Unknown models, missing names and a
missing library give ``None`` and one note each in :class:`Pricing`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from typing import Any

from .._ledger._usage_record import UsageRecord

__all__ = ["Pricing", "TokenSplit", "genai_prices_version", "price_call"]

_GENAI_PROVIDERS = {"gemini": "google", "bedrock": "aws", "xai": "x-ai"}


@dataclass
class Pricing:
    """How costs were computed.

    Attributes:
        source: ``"genai-prices <version>"`` (or why pricing is unavailable).
        first_date: Earliest call date priced.
        last_date: Latest call date priced.
        notes: Why some costs were omitted (unknown model, ...), one line each.
    """

    source: str = ""
    first_date: date | None = None
    last_date: date | None = None
    notes: list[str] = field(default_factory=list)

    def as_of(self) -> str | None:
        """``"2026-01-01"`` or ``"2026-01-01..2026-01-03"``; ``None`` when nothing was priced."""
        if self.first_date is None or self.last_date is None:
            return None
        if self.first_date == self.last_date:
            return self.first_date.isoformat()
        return f"{self.first_date.isoformat()}..{self.last_date.isoformat()}"

    def to_json(self) -> dict[str, Any]:
        """``{"source", "as_of", "notes"}``."""
        return {"source": self.source, "as_of": self.as_of(), "notes": list(self.notes)}


@dataclass(frozen=True, slots=True)
class TokenSplit:
    """Input tokens of one call: ``total`` (inclusive) of which ``read`` from the cache and
    ``write`` written to it (``write_1h`` of those with the 1-hour TTL); the rest uncached."""

    total: int
    read: int
    write: int
    write_1h: int = 0

    @classmethod
    def of(cls, record: UsageRecord) -> TokenSplit:
        """The split the provider reported (unknown fields as 0)."""
        return cls(record.input_tokens_total or 0, record.cache_read_tokens or 0,
                   record.cache_write_tokens or 0, record.cache_write_1h_tokens or 0)

    def reading(self, read: int) -> TokenSplit:
        """The same call had it read ``read`` tokens (at least what it read): the extra reads
        come out of its writes first (a breakpoint cache rewrites what it lost; 5-minute
        writes before 1-hour ones), then out of its uncached tokens."""
        read = min(max(read, self.read), self.total)
        extra = read - self.read
        write = max(self.write - extra, 0)
        return TokenSplit(self.total, read, write, min(self.write_1h, write))

    def uncached(self) -> TokenSplit:
        """The same call with no prompt caching at all: every input token uncached."""
        return TokenSplit(self.total, 0, 0, 0)


@lru_cache(maxsize=65_536)
def _price(provider: str, model: str, day: date, total: int, read: int, write: int,
           write_1h: int, output: int) -> float:
    from genai_prices import Usage, calc_price

    usage: dict[str, int] = {"input_tokens": total, "cache_read_tokens": read,
                             "cache_write_tokens": write, "output_tokens": output}
    if write_1h:
        usage["cache_write_1h_tokens"] = write_1h
    stamp = datetime(day.year, day.month, day.day, 12)
    result = calc_price(Usage(**usage), model, provider_id=_GENAI_PROVIDERS.get(provider, provider),
                        genai_request_timestamp=stamp)
    return float(result.total_price)


def genai_prices_version() -> str | None:
    """``"genai-prices <version>"``, ``None`` when the library is not installed."""
    try:
        from importlib.metadata import version

        return f"genai-prices {version('genai-prices')}"
    except Exception:
        return None


def price_call(record: UsageRecord, pricing: Pricing, notes: dict[str, None],
               split: TokenSplit | None = None) -> float | None:
    """Price one call (USD) at its date; ``split`` replaces its reported input split.

    Args:
        record: The call (provider, model, date and output tokens are taken from it).
        pricing: Updated with the dates priced.
        notes: Collects why a call could not be priced (one key per reason).
        split: Input tokens to price (default: as reported, :meth:`TokenSplit.of`).

    Returns:
        The price, or ``None`` (with a note) when it cannot be priced.
    """
    if pricing.source.startswith("genai-prices not"):
        notes["genai-prices is not installed: costs omitted"] = None
        return None
    model, provider = record.model, record.provider
    if not model or not provider:
        notes["calls without a model or provider name: cost omitted"] = None
        return None
    split = split or TokenSplit.of(record)
    day = record.ts_utc.date()
    try:
        cost = _price(provider, model, day, split.total, split.read, split.write,
                      split.write_1h, record.output_tokens or 0)
    except LookupError:
        notes[f"genai-prices has no price for model {model!r} at provider {provider!r}: "
              "cost omitted"] = None
        return None
    except Exception as exc:  # a pricing-library problem must not hide the token numbers
        notes[f"cannot price {model!r}: {type(exc).__name__}: {exc}"] = None
        return None
    if pricing.first_date is None or day < pricing.first_date:
        pricing.first_date = day
    if pricing.last_date is None or day > pricing.last_date:
        pricing.last_date = day
    return cost
