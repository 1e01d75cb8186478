"""What ``--stabilize`` saved, or cost: the calls it rewrote, per rewrite kind, and what each
rewritten call read, wrote and paid against the counterfactual, the same call had its request
gone out as the client wrote it.

A call the stabilizer rewrote has ``verdict_detail["stabilized"]`` (the rewrite names,
``_recording._stabilize.STABILIZE_REWRITES``) and, for tool rewrites, the evidence the
stabilizer measured on the requests it saw (``_recording._stabilize.Stabilizer``):
``client_shared_tokens``, the longest prefix the request *as the client wrote it* shares with
an earlier request as its client wrote it (what it could have read, had nothing been
rewritten), and ``stabilized_shared_tokens``, the same for the request as sent, against
earlier stabilized requests (what it can read now), both in our tokenizer's tokens. Every
rewritten call counts once under each of its rewrites (``calls``).

**The counterfactual** of a rewritten call whose usage is known (an excluded call,
:func:`~._calls.exclusion`, is counted but not estimated), credited to one rewrite kind so
nothing is counted twice:

* ``head-breakpoint`` / ``history-breakpoint`` (credited to ``history-breakpoint`` when both):
  the client placed no breakpoint, and Anthropic reads and writes the cache only at
  breakpoints, so the request as sent would have read nothing *and written nothing*: every
  input token uncached. Reads gained = the call's ``cache_read_tokens``; writes added = its
  ``cache_write_tokens``. A harness whose history breakpoints are written and never read
  (history rewritten every call) gains no reads and pays 1.25x on the writes: its saving is
  negative. Source: platform.claude.com/docs/en/build-with-claude/prompt-caching (caching is
  enabled by ``cache_control`` markers, explicit or top-level; writes cost 1.25x the input
  price for 5 minutes).
* ``tool-order`` / ``schema-key-order`` / ``property-order`` (credited to the first of them
  present): with ``P_c`` = ``client_shared_tokens`` and ``P_s`` =
  ``stabilized_shared_tokens``, scaled to provider tokens by the call's
  ``input_tokens_total / request_tokens``, and ``R`` the call's reads: when ``P_c <= P_s``
  the rewrite made shareable what lies between them, so reads gained = ``min(R, P_s) -
  min(R, P_c)`` (0 when the request as written shared as much: a new lineage reading across
  lineages what its original would have read too is credited nothing); when ``P_c > P_s``
  the rewrite made the request share less than it would have (sorting split two orders that
  began alike), so reads gained = ``-(P_c - P_s)`` on a call that read anything. The
  counterfactual writes are the call's writes plus its reads gained, when it wrote at all
  (a breakpoint cache writes what it does not read). A row without the evidence (no token
  counter, or written before this accounting: ``stabilized_prefix_tokens`` only) is counted,
  not estimated.
* ``prompt-cache-key``: a routing hint; no row can know which server a keyless request would
  have reached, so these calls are counted, never estimated.

**Saved USD**: the call priced with the counterfactual split minus its price as reported
(:func:`~._pricing.price_call`): negative when the rewrite cost more than it saved. ``None``
when a call could not be priced.

Limits: ``P_c`` and ``P_s`` are what one stabilizer saw since it started (a proxy restart
forgets; reads beyond ``P_s`` came from before it and are not credited); a call the
stabilizer left unrewritten is not estimated, although the rewrites of others may have changed
what it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._ledger._usage_record import UsageRecord
from ._calls import CallRow
from ._pricing import Pricing, TokenSplit, price_call

__all__ = ["KINDS", "KindSavings", "StabilizeSavings"]

KINDS = ("tool-order", "schema-key-order", "property-order", "prompt-cache-key",
         "head-breakpoint", "history-breakpoint", "breakpoint-ttl")
"""The rewrite kinds, in display order (``_recording._stabilize.STABILIZE_REWRITES``)."""

_BREAKPOINTS = ("history-breakpoint", "head-breakpoint")
_TOOLS = ("tool-order", "schema-key-order", "property-order")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class KindSavings:
    """One rewrite kind: calls rewritten, and what the calls credited to it read, wrote and
    paid against their counterfactual (module docstring).

    Attributes:
        calls: Calls with this rewrite.
        estimated: Of those, calls whose counterfactual was estimated and credited here.
        saved_tokens: Cache reads gained (provider tokens): what the calls read minus what
            the requests as written would have read; negative when the rewrite lost reads.
        write_tokens: Cache writes added (provider tokens), the same way.
        saved_usd: The counterfactual price minus the price paid, in USD: negative when the
            rewrite cost more than it saved (``None``: some call could not be priced).
    """

    calls: int = 0
    estimated: int = 0
    saved_tokens: int = 0
    write_tokens: int = 0
    saved_usd: float | None = 0.0

    def to_json(self) -> dict[str, Any]:
        """``{"calls", "estimated", "saved_tokens", "write_tokens", "saved_usd"}`` (USD to 6
        digits)."""
        return {"calls": self.calls, "estimated": self.estimated,
                "saved_tokens": self.saved_tokens, "write_tokens": self.write_tokens,
                "saved_usd": None if self.saved_usd is None else round(self.saved_usd, 6)}


def _tool_counterfactual(record: UsageRecord, split: TokenSplit) -> TokenSplit | None:
    """The split of a tool-rewritten call had its request gone out as written (module
    docstring), ``None`` without the evidence."""
    detail = record.verdict_detail
    client = _int(detail.get("client_shared_tokens"))
    stable = _int(detail.get("stabilized_shared_tokens"))
    if client is None or stable is None:
        return None
    total, ours = record.input_tokens_total, record.request_tokens
    if total and ours:  # our tokenizer's tokens -> the provider's
        client, stable = round(client * total / ours), round(stable * total / ours)
    read = split.read
    if client <= stable:
        gained = min(read, stable) - min(read, client)
    else:
        gained = -(client - stable) if read else 0
    cf_read = min(max(read - gained, 0), split.total)
    gained = read - cf_read
    cf_write = max(split.write + gained, 0) if split.write else split.write
    cf_write = min(cf_write, split.total - cf_read)
    return TokenSplit(split.total, cf_read, cf_write, min(split.write_1h, cf_write))


@dataclass
class StabilizeSavings:
    """What stabilizing saved or cost over a ledger (module docstring): per kind, and in
    total. Fed in ledger order by :func:`~._summary.summarize` (:meth:`add`)."""

    calls: int = 0
    kinds: dict[str, KindSavings] = field(default_factory=dict)

    @property
    def saved_tokens(self) -> int:
        """Cache reads gained over every kind (negative: lost)."""
        return sum(k.saved_tokens for k in self.kinds.values())

    @property
    def write_tokens(self) -> int:
        """Cache writes added over every kind."""
        return sum(k.write_tokens for k in self.kinds.values())

    @property
    def saved_usd(self) -> float | None:
        """Saved USD over every kind (negative: a cost; ``None`` when any is unknown)."""
        total: float | None = 0.0
        for kind in self.kinds.values():
            total = None if total is None or kind.saved_usd is None else total + kind.saved_usd
        return total

    def add(self, record: UsageRecord, row: CallRow, pricing: Pricing | None,
            notes: dict[str, None]) -> None:
        """Count one call (every call, in ledger order; only rewritten ones count)."""
        rewrites = record.verdict_detail.get("stabilized")
        if not isinstance(rewrites, list) or not rewrites:
            return
        names = [name for name in rewrites if isinstance(name, str)]
        self.calls += 1
        for name in names:
            self.kinds.setdefault(name, KindSavings()).calls += 1
        if not row.included or row.cache_read_tokens is None:
            return
        split = TokenSplit.of(record)
        credit = next((k for k in (*_BREAKPOINTS, *_TOOLS) if k in names), None)
        if credit in _BREAKPOINTS:
            counterfactual: TokenSplit | None = split.uncached()
        elif credit in _TOOLS:
            counterfactual = _tool_counterfactual(record, split)
        else:
            return
        if counterfactual is None or credit is None:
            return
        kind = self.kinds[credit]
        kind.estimated += 1
        kind.saved_tokens += split.read - counterfactual.read
        kind.write_tokens += split.write - counterfactual.write
        if kind.saved_usd is None:
            return
        usd: float | None = None
        if counterfactual == split:
            usd = 0.0
        elif pricing is not None and row.cost_usd is not None:
            unsaved = price_call(record, pricing, notes, counterfactual)
            usd = None if unsaved is None else unsaved - row.cost_usd
        kind.saved_usd = None if usd is None else kind.saved_usd + usd

    def to_json(self) -> dict[str, Any]:
        """``{"calls", "saved_tokens", "write_tokens", "saved_usd", "kinds": {kind:
        {...}}}``, kinds in :data:`KINDS` order (only those seen)."""
        usd = self.saved_usd
        return {"calls": self.calls, "saved_tokens": self.saved_tokens,
                "write_tokens": self.write_tokens,
                "saved_usd": None if usd is None else round(usd, 6),
                "kinds": {k: self.kinds[k].to_json() for k in (*KINDS, *sorted(self.kinds))
                          if k in self.kinds}}
