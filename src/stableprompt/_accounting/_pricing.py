"""Call prices: the report's use of `genai-prices <https://pypi.org/project/genai-prices/>`_.

Prices are looked up once per (provider, model, day) (:func:`~stableprompt._economics._prices.
unit_prices`) and applied to each call's token split; a call those base-tier rates do not
price exactly (its input total at or past a long-context tier, a server-tool fee) is priced by
genai-prices itself (``_price``), cached per distinct split.

:func:`price_record` prices one :class:`~stableprompt.UsageRecord` (USD) at its own date
(``ts_utc``) for its provider and model, as reported or with its token split replaced (what the
call would have cost all uncached, at its ceiling, or had its lost tokens been read): cache
reads and writes, including the 1-hour write split, at their own rates; the long-context tier
(e.g. Claude Sonnet 4.5 above 200,000 input tokens) is chosen by genai-prices from the
inclusive input total passed to it, cache reads and writes included, as Anthropic's pricing
page counts it. Server-tool fees are added from the counts in the usage's ``server_tool_use``
(:data:`SERVER_TOOL_FEES`).

Every call whose usage parsed is priced, whether or not its usage is suspect or added up (a
report that does not add up is priced from its parts when none is negative). A price is
``None`` when it cannot be computed (no usage, cache reads not reported, a negative part,
unknown model, missing library) and is a lower bound when part of the call is unknown (a
stream cut before its output count, a server-tool count without a known fee):
:attr:`CallPrice.gaps` says which, one phrase each. Model and library problems also leave
one note each in :class:`Pricing`. :func:`price_call` is the same price as a bare number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from typing import Any

from .._economics._prices import GENAI_PROVIDERS, UnitPrices, unit_prices
from .._frozen import slotted_maker
from .._ledger._usage_record import UsageRecord

__all__ = ["SERVER_TOOL_FEES", "CallPrice", "Pricing", "ServerToolFee", "TokenSplit",
           "fee_usd", "genai_prices_version", "price_call", "price_readings", "price_record",
           "price_splits",
           "server_tool_counts", "unreadable_server_tools"]



@dataclass(frozen=True, slots=True)
class ServerToolFee:
    """How one count under a usage's ``server_tool_use`` is priced, beyond its tokens.

    Attributes:
        tool: Human name (``"web search"``).
        genai_usage_key: The genai-prices usage key that prices the count at the model's own
            rate for the call's date (``"web_searches"``); ``None``: no fee (free).
        genai_price_key: The genai-prices price key of that rate (``"web_searches_kcount"``,
            USD per 1,000 uses); a model without it leaves the fee unpriced (a gap).
        source: Where the fee (or its absence) is stated.
        as_of: Date (ISO) the source was read.
    """

    tool: str
    genai_usage_key: str | None
    genai_price_key: str | None
    source: str
    as_of: str


SERVER_TOOL_FEES: Mapping[str, ServerToolFee] = {
    "web_search_requests": ServerToolFee(
        "web search", "web_searches", "web_searches_kcount",
        "https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-search-tool "
        "(usage and pricing: $10 per 1,000 searches, plus the tokens of the results); the "
        "per-model rate is genai-prices' (its data cites the same page)", "2026-12-07"),
    "web_fetch_requests": ServerToolFee(
        "web fetch", None, None,
        "https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-fetch-tool "
        "(usage and pricing: no charge beyond the tokens of the fetched content; not re-read "
        "against the live page, UNVERIFIED there)", "2026-12-07"),
}
"""Fees of Anthropic's server tools, by their key in ``usage.server_tool_use`` (the counts
``anthropic.types.ServerToolUsage`` carries: ``web_search_requests``, ``web_fetch_requests``).
A count under any other key (a tool added later) has no known fee: its call's price is a
lower bound with a gap naming it, never a guess. Code execution is billed by container hours
(Anthropic's code-execution tool page), which no usage object carries: it is not priced, and
nothing in the usage shows that it ran. OpenAI's hosted tools (``web_search``,
``file_search``) are billed per call too, but their usage objects carry no count (the calls
are output items): not priced either."""


def server_tool_counts(record: UsageRecord) -> dict[str, int]:
    """The positive counts under ``record.usage_raw["server_tool_use"]``, by key; ``{}`` when
    there are none (unknown usage, another wire format, no server tool used)."""
    raw = record.usage_raw or {}
    used = raw.get("server_tool_use")
    if not isinstance(used, Mapping):
        return {}
    return {key: value for key, value in used.items()
            if isinstance(value, int) and not isinstance(value, bool) and value > 0}


def unreadable_server_tools(record: UsageRecord) -> list[str]:
    """What of ``record.usage_raw["server_tool_use"]`` cannot be read as a count (a count
    that is not a non-negative integer: ``3.0``, ``"3"``, ``true``; the member not an
    object): each is a fee that cannot be priced, so the call's cost is a lower bound."""
    raw = record.usage_raw or {}
    if "server_tool_use" not in raw or raw["server_tool_use"] is None:
        return []
    used = raw["server_tool_use"]
    if not isinstance(used, Mapping):
        return ["server_tool_use is not an object"]
    return [f"server_tool_use.{key} = {value!r} is not a count" for key, value in used.items()
            if isinstance(value, bool) or not isinstance(value, int) or value < 0]


@dataclass(frozen=True, slots=True)
class CallPrice:
    """One call's price.

    Attributes:
        usd: USD, ``None`` when it cannot be computed; else what the known part costs.
        gaps: Why ``usd`` is unknown or only a lower bound, one phrase each (``"usage
            unknown (...)"``, ``"output tokens unknown (...)"``); empty when it is the
            call's whole cost.
    """

    usd: float | None
    gaps: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """``usd`` is the call's whole cost."""
        return self.usd is not None and not self.gaps


_call_price = slotted_maker(CallPrice)
"""``CallPrice(...)``, faster (``_frozen.slotted_maker``): one per priced call."""


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
        return _split(*_reported(record))

    def reading(self, read: int) -> TokenSplit:
        """The same call had it read ``read`` tokens (at least what it read): the extra reads
        come out of its writes first (a breakpoint cache rewrites what it lost; 5-minute
        writes before 1-hour ones), then out of its uncached tokens."""
        return _split(self.total, *_reading(self.total, self.read, self.write, self.write_1h,
                                            read))

    def uncached(self) -> TokenSplit:
        """The same call with no prompt caching at all: every input token uncached."""
        return _split(self.total, 0, 0, 0)

    @property
    def priceable(self) -> bool:
        """No part is negative: reads and writes fit in the total, 1-hour writes in the
        writes (a report that does not add up otherwise is still priced from its parts)."""
        return _priceable(self.total, self.read, self.write, self.write_1h)


_split = slotted_maker(TokenSplit)
"""``TokenSplit(...)``, faster (``_frozen.slotted_maker``): for the splits priced one by one."""


def _reading(total: int, read: int, write: int, write_1h: int,
             new_read: int) -> tuple[int, int, int]:
    """``(read, write, write_1h)`` of :meth:`TokenSplit.reading` of the split ``(total, read,
    write, write_1h)`` (the one rule, over ints)."""
    new_read = min(max(new_read, read), total)
    write = max(write - (new_read - read), 0)
    return new_read, write, min(write_1h, write)


def _reported(record: UsageRecord) -> tuple[int, int, int, int]:
    """``(total, read, write, write_1h)`` input tokens the provider reported (unknown as 0):
    :meth:`TokenSplit.of`'s fields."""
    return (record.input_tokens_total or 0, record.cache_read_tokens or 0,
            record.cache_write_tokens or 0, record.cache_write_1h_tokens or 0)


def _priceable(total: int, read: int, write: int, write_1h: int) -> bool:
    """:attr:`TokenSplit.priceable` of the split ``(total, read, write, write_1h)``."""
    return 0 <= write_1h <= write and read >= 0 and read + write <= total


@lru_cache(maxsize=65_536)
def _price(provider: str, model: str, day: date, total: int, read: int, write: int,
           write_1h: int, output: int,
           fees: tuple[tuple[str, int], ...] = ()) -> tuple[float, tuple[str, ...]]:
    """USD of the tokens and of the server-tool ``fees`` (``(server_tool_use key, count)``
    pairs, keys of :data:`SERVER_TOOL_FEES`), and the keys whose fee the model has no rate
    for (not priced)."""
    from genai_prices import Usage, calc_price

    usage: dict[str, int] = {"input_tokens": total, "cache_read_tokens": read,
                             "cache_write_tokens": write, "output_tokens": output}
    if write_1h:
        usage["cache_write_1h_tokens"] = write_1h
    for key, count in fees:
        usage_key = SERVER_TOOL_FEES[key].genai_usage_key
        if usage_key is not None:
            usage[usage_key] = count
    stamp = datetime(day.year, day.month, day.day, 12)
    result = calc_price(Usage(**usage), model, provider_id=GENAI_PROVIDERS.get(provider, provider),
                        genai_request_timestamp=stamp)
    unpriced = tuple(key for key, _ in fees if (price_key := SERVER_TOOL_FEES[key].genai_price_key)
                     and getattr(result.model_price, price_key, None) is None)
    return float(result.total_price), unpriced


def fee_usd(provider: str, model: str, day: date, key: str, count: int,
            notes: dict[str, None]) -> float | None:
    """USD of ``count`` uses of the server tool ``key`` (a key of :data:`SERVER_TOOL_FEES`)
    by ``model`` on ``day``, at genai-prices' rate (linear in the count: rollups price a summed
    count); ``0.0`` for a tool without a fee; ``None`` when the model has no rate for it (a
    note says so)."""
    fee = SERVER_TOOL_FEES[key]
    if fee.genai_usage_key is None:
        return 0.0
    try:
        usd, unpriced = _price(provider, model, day, 0, 0, 0, 0, 0, ((key, count),))
    except Exception:  # an unknown model: the caller found its unit prices, so rarely
        unpriced = (key,)
    if unpriced:
        notes[f"{fee.tool} fees of {model!r}: genai-prices has no rate: not priced"] = None
        return None
    notes[f"{fee.tool} fees: priced per use from usage.server_tool_use.{key} at "
          f"genai-prices' rate for the call's model and date ({fee.source}; "
          f"{fee.as_of})"] = None
    return usd


def genai_prices_version() -> str | None:
    """``"genai-prices <version>"``, ``None`` when the library is not installed."""
    try:
        from importlib.metadata import version

        return f"genai-prices {version('genai-prices')}"
    except Exception:
        return None


def price_call(record: UsageRecord, pricing: Pricing, notes: dict[str, None],
               split: TokenSplit | None = None) -> float | None:
    """:func:`price_record`'s USD alone (``None``: unknown; a lower bound when it has gaps)."""
    return price_record(record, pricing, notes, split).usd


def price_record(record: UsageRecord, pricing: Pricing, notes: dict[str, None],
                 split: TokenSplit | None = None) -> CallPrice:
    """:func:`price_splits`'s price of ``split`` alone (the docstring there)."""
    return price_splits(record, pricing, notes, split)[0]


def price_splits(record: UsageRecord, pricing: Pricing, notes: dict[str, None],
                 split: TokenSplit | None = None, others: tuple[TokenSplit, ...] = (),
                 ) -> tuple[CallPrice, list[float | None]]:
    """Price one call and the same call with its input split replaced by each of ``others``
    (its cost uncached, at its ceiling, ...: the same input total, so the same tier): the
    model's unit prices are found once and applied to each split; a call they do not price
    exactly is priced split by split as :func:`price_call` (same numbers either way).

    Returns:
        ``(price, usd)``: :func:`price_record`'s price of ``split`` and :func:`price_call`'s
        USD of each of ``others`` (all ``None`` when ``price.usd`` is ``None``).
    """
    split = split or TokenSplit.of(record)
    price_total = split.total  # the rates hold for a split of the same total (same tier)
    price, rates = _price_record(record, pricing, notes, split)
    if price.usd is None:
        return price, [None for _ in others]
    output = record.output_tokens or 0
    return price, [rates.usd(o.total, o.read, o.write, o.write_1h, output)
                   if rates is not None and o.total == price_total else
                   price_call(record, pricing, notes, o) for o in others]


def price_readings(record: UsageRecord, pricing: Pricing, notes: dict[str, None],
                   reads: tuple[int, ...] = ()) -> tuple[CallPrice, list[float | None]]:
    """:func:`price_splits` of the split the provider reported, with ``others`` the same call
    all uncached (:meth:`TokenSplit.uncached`) and had it read each of ``reads``
    (:meth:`TokenSplit.reading`): the same prices (floats to the bit), without a split
    object per variant when the model's unit prices apply (the report prices three or four
    variants of every call).

    Returns:
        ``(price, usd)``: the price as reported and the USD of the uncached variant, then of
        each of ``reads`` (all ``None`` when ``price.usd`` is ``None``).
    """
    total, read, write, write_1h = _reported(record)
    price, rates = _price_ints(record, pricing, notes, total, read, write, write_1h)
    if price.usd is None:
        return price, [None] * (len(reads) + 1)
    if rates is None:  # genai-prices prices each variant (price_splits)
        split = _split(total, read, write, write_1h)
        return price, [price_call(record, pricing, notes, o)
                       for o in (split.uncached(), *(split.reading(r) for r in reads))]
    output = record.output_tokens or 0
    usd = rates.usd  # the same total for every variant: the same tier (price_splits)
    out: list[float | None] = [usd(total, 0, 0, 0, output)]
    for r in reads:
        out.append(usd(total, *_reading(total, read, write, write_1h, r), output))
    return price, out


def _price_record(record: UsageRecord, pricing: Pricing, notes: dict[str, None],
                  split: TokenSplit | None = None) -> tuple[CallPrice, UnitPrices | None]:
    """Price one call (USD) at its date; ``split`` replaces its reported input split.

    Args:
        record: The call (provider, model, date, output tokens and ``usage_raw``'s
            server-tool counts are taken from it).
        pricing: Updated with the dates priced.
        notes: Collects why calls could not be priced and which fees were added (one key
            per reason).
        split: Input tokens to price (default: as reported, :meth:`TokenSplit.of`).

    Returns:
        The price (module docstring): ``usd`` ``None`` with a gap when it cannot be computed;
        a lower bound with gaps when the output count or a server-tool fee is unknown; and
        the unit prices that priced it (``None``: genai-prices priced it itself, or no price).
    """
    split = split or TokenSplit.of(record)
    return _price_ints(record, pricing, notes, split.total, split.read, split.write,
                       split.write_1h)


def _price_ints(record: UsageRecord, pricing: Pricing, notes: dict[str, None], total: int,
                read: int, write: int, write_1h: int) -> tuple[CallPrice, UnitPrices | None]:
    """:func:`_price_record` of the input split ``(total, read, write, write_1h)``."""
    if record.input_tokens_total is None:
        return _call_price(None, ("usage unknown (the call failed or was cut before any usage "
                                  "was reported)",)), None
    if record.cache_read_tokens is None:
        return _call_price(None, ("cache reads not reported (the split is unknown)",)), None
    if not _priceable(total, read, write, write_1h) or (record.output_tokens or 0) < 0:
        return _call_price(None, ("usage does not add up (a negative part): no price",)), None
    if pricing.source.startswith("genai-prices not"):
        notes["genai-prices is not installed: costs omitted"] = None
        return _call_price(None, ("genai-prices not installed",)), None
    model, provider = record.model, record.provider
    if not model or not provider:
        notes["calls without a model or provider name: cost omitted"] = None
        return _call_price(None, ("no model or provider name",)), None
    gaps: list[str] = []
    tools: dict[str, int] = {}
    raw = record.usage_raw
    if raw is not None and raw.get("server_tool_use") is not None:  # most calls: no tools
        gaps.extend(f"{problem}: its fee is not priced"
                    for problem in unreadable_server_tools(record))
        tools = server_tool_counts(record)
    fees: list[tuple[str, int]] = []
    for key, count in tools.items():
        fee = SERVER_TOOL_FEES.get(key)
        if fee is None:
            gaps.append(f"{count:,} server_tool_use.{key} without a known fee: not priced")
            continue
        fees.append((key, count))
        if fee.genai_usage_key is not None:
            notes[f"{fee.tool} fees: priced per use from usage.server_tool_use.{key} at "
                  f"genai-prices' rate for the call's model and date ({fee.source}; "
                  f"{fee.as_of})"] = None
    day = record.ts_utc.date()
    rates = None if fees else unit_prices(provider, model, day)
    try:
        if rates is not None and rates.linear_for(total):  # the model's rates, once
            cost = rates.usd(total, read, write, write_1h, record.output_tokens or 0)
            unpriced: tuple[str, ...] = ()
        else:  # a long-context tier, a server-tool fee: genai-prices prices the call itself
            rates = None
            cost, unpriced = _price(provider, model, day, total, read, write, write_1h,
                                    record.output_tokens or 0, tuple(fees))
    except LookupError:
        notes[f"genai-prices has no price for model {model!r} at provider {provider!r}: "
              "cost omitted"] = None
        return _call_price(None, ("its model has no price in genai-prices (see the pricing "
                                  "notes)",)), None
    except Exception as exc:  # a pricing-library problem must not hide the token numbers
        notes[f"cannot price {model!r}: {type(exc).__name__}: {exc}"] = None
        return _call_price(None, ("the pricing library failed (see the pricing notes)",)), None
    if unpriced:
        gaps.extend(f"{SERVER_TOOL_FEES[key].tool} fee: genai-prices has no rate for its "
                    "model" for key in unpriced)
    if record.output_tokens is None:
        gaps.append("output tokens unknown (the response ended before its final usage): "
                    "input priced")
    if pricing.first_date is None or day < pricing.first_date:
        pricing.first_date = day
    if pricing.last_date is None or day > pricing.last_date:
        pricing.last_date = day
    return _call_price(cost, tuple(gaps)), rates
