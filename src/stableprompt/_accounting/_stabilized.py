"""What ``--stabilize`` saved: the calls it rewrote, per rewrite kind, and an estimate of the
cache reads (tokens and dollars) the rewrites made possible.

A call the stabilizer rewrote has ``verdict_detail["stabilized"]`` (the rewrite names,
``_recording._stabilize.STABILIZE_REWRITES``) and, for tool rewrites, the evidence
``stabilized_tools`` (a digest of the tools as the client sent them) and
``stabilized_prefix_tokens`` (our tokenizer's count of what precedes the first tool the
rewrite changed). Every rewritten call counts once under each of its rewrites (``calls``).

**Saved tokens** are estimated per rewritten call whose usage is known (an excluded call,
:func:`~._calls.exclusion`, is counted but not estimated), as what it read minus what the
request *as the client wrote it* would have read from the same cache, and credited to one
rewrite kind so nothing is counted twice:

* ``head-breakpoint`` / ``history-breakpoint`` (credited to ``history-breakpoint`` when both):
  the client placed no breakpoint, and Anthropic reads the cache only at breakpoints, so the
  request as sent would have read nothing: saved = the call's ``cache_read_tokens``.
  Source: platform.claude.com/docs/en/build-with-claude/prompt-caching (caching is enabled by
  ``cache_control`` markers, explicit or top-level).
* ``tool-order`` / ``schema-key-order`` (credited to ``tool-order`` when both): the request
  as sent shares with the cached, stabilized prefix at most what precedes the first tool the
  rewrite changed, so it would have read ``min(read, prefix)``, the prefix scaled to provider
  tokens by the call's ``input_tokens_total / request_tokens``: saved = ``read - min(read,
  prefix)``. Not in that case: when the client sent the very same tools (same digest) as on
  the previous call of its lineage, it would have matched its own previous request without
  any rewrite, so saved = 0. A row without the prefix (no token counter) is not estimated
  (``estimated`` counts the calls that were).
* ``prompt-cache-key``: a routing hint; no row can know which server a keyless request would
  have reached, so these calls are counted, never estimated.

**Saved USD**: the call priced as if the saved tokens had been uncached instead of read,
minus its price as reported (:func:`~._pricing.price_call`); writes are kept as reported
(the request as sent would have written what it missed too, so this is a lower bound).
``None`` when a call could not be priced.

Limits: "the same cache" is the one the stabilized calls filled. A client whose tools change
order only sometimes is credited only for the calls where they changed; one that never sent
a breakpoint is credited with all its reads, which is what it would have lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._ledger._usage_record import UsageRecord
from ._calls import CallRow
from ._pricing import Pricing, TokenSplit, price_call

__all__ = ["KINDS", "KindSavings", "StabilizeSavings"]

KINDS = ("tool-order", "schema-key-order", "prompt-cache-key", "head-breakpoint",
         "history-breakpoint")
"""The rewrite kinds, in display order (``_recording._stabilize.STABILIZE_REWRITES``)."""

_BREAKPOINTS = ("history-breakpoint", "head-breakpoint")
_TOOLS = ("tool-order", "schema-key-order")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class KindSavings:
    """One rewrite kind: calls rewritten, and the tokens and USD credited to it.

    Attributes:
        calls: Calls with this rewrite.
        estimated: Of those, calls whose saving was estimated and credited here.
        saved_tokens: Estimated cache-read tokens the rewrite made possible (provider
            tokens).
        saved_usd: What those reads saved in USD (``None``: some call could not be priced).
    """

    calls: int = 0
    estimated: int = 0
    saved_tokens: int = 0
    saved_usd: float | None = 0.0

    def to_json(self) -> dict[str, Any]:
        """``{"calls", "estimated", "saved_tokens", "saved_usd"}`` (USD to 6 digits)."""
        return {"calls": self.calls, "estimated": self.estimated,
                "saved_tokens": self.saved_tokens,
                "saved_usd": None if self.saved_usd is None else round(self.saved_usd, 6)}


@dataclass
class StabilizeSavings:
    """What stabilizing saved over a ledger (module docstring): per kind, and in total.

    Fed in ledger order by :func:`~._summary.summarize` (:meth:`add`).
    """

    calls: int = 0
    kinds: dict[str, KindSavings] = field(default_factory=dict)
    _tools: dict[str, str] = field(default_factory=dict, repr=False)  # lineage -> digest

    @property
    def saved_tokens(self) -> int:
        """Estimated saved tokens over every kind."""
        return sum(k.saved_tokens for k in self.kinds.values())

    @property
    def saved_usd(self) -> float | None:
        """Estimated saved USD over every kind (``None`` when any is unknown)."""
        total: float | None = 0.0
        for kind in self.kinds.values():
            total = None if total is None or kind.saved_usd is None else total + kind.saved_usd
        return total

    def add(self, record: UsageRecord, row: CallRow, pricing: Pricing | None,
            notes: dict[str, None]) -> None:
        """Count one call (every call, in ledger order: unrewritten ones update the
        lineage's last tool digest too)."""
        detail = record.verdict_detail
        digest = detail.get("stabilized_tools")
        previous = self._tools.pop(record.lineage or "", None)
        if record.lineage:
            # an unrewritten call sent its tools as they are cached: never equal to a digest
            self._tools[record.lineage] = digest if isinstance(digest, str) else ""
        rewrites = detail.get("stabilized")
        if not isinstance(rewrites, list) or not rewrites:
            return
        names = [name for name in rewrites if isinstance(name, str)]
        self.calls += 1
        for name in names:
            self.kinds.setdefault(name, KindSavings()).calls += 1
        if not row.included or row.cache_read_tokens is None:
            return
        read = row.cache_read_tokens
        credit = next((k for k in (*_BREAKPOINTS, *_TOOLS) if k in names), None)
        if credit in _BREAKPOINTS:
            saved = read
        elif credit in _TOOLS:
            prefix = _int(detail.get("stabilized_prefix_tokens"))
            if prefix is None:
                return
            if isinstance(digest, str) and digest == previous:
                saved = 0
            else:
                total, ours = record.input_tokens_total, record.request_tokens
                if total and ours:
                    prefix = round(prefix * total / ours)
                saved = read - min(read, prefix)
        else:
            return
        kind = self.kinds[credit]
        kind.estimated += 1
        kind.saved_tokens += saved
        if kind.saved_usd is None:
            return
        usd: float | None = 0.0
        if saved and pricing is not None and row.cost_usd is not None:
            split = TokenSplit.of(record)
            unsaved = price_call(record, pricing, notes, TokenSplit(
                split.total, split.read - saved, split.write, split.write_1h))
            usd = None if unsaved is None else max(unsaved - row.cost_usd, 0.0)
        elif saved:
            usd = None
        kind.saved_usd = None if usd is None else kind.saved_usd + usd

    def to_json(self) -> dict[str, Any]:
        """``{"calls", "saved_tokens", "saved_usd", "kinds": {kind: {...}}}``, kinds in
        :data:`KINDS` order (only those seen)."""
        usd = self.saved_usd
        return {"calls": self.calls, "saved_tokens": self.saved_tokens,
                "saved_usd": None if usd is None else round(usd, 6),
                "kinds": {k: self.kinds[k].to_json() for k in (*KINDS, *sorted(self.kinds))
                          if k in self.kinds}}
