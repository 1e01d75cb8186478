"""Gemini explicit caches in a ledger: storage priced per token-hour next to the reads, and
the break-even of each cache.

An explicit cache (``cachedContents``) is billed for its storage, per token-hour, for as long
as it lives, on top of its creation and its (discounted) reads (PROVIDERS.md §4.3, §15). The
recorder writes one row per create / update / delete (``_recording._gemini_caches``:
``verdict_detail["gemini_cache"]``) and marks each prompt request that reads a cache
(``verdict_detail["cached_content"]``: its name). From those rows, per cache:

- its life: from the create row's time for the ``ttl_s`` its answer set, each update setting
  a new ``ttl_s`` from its own time, a delete ending it (a cache not deleted in the ledger
  lives, and is billed, until its last expiry); failed calls change nothing;
- storage: :meth:`ExplicitCacheRule.storage_usd <stableprompt._policy.ExplicitCacheRule>` of
  its tokens for that life (the one storage rule, also the what-if's); creation: its tokens
  at the rule's fresh-input price (Vertex: creation is "billed ... at the standard input
  token price"; UNVERIFIED for the Gemini API, as in the what-if);
- reads: the 2xx prompt requests that named it, and their cache-read tokens (already priced
  with the calls, at the read price);
- break-even: :meth:`ExplicitCacheRule.break_even_reads` for its life, and whether the reads
  it served reach it.

Cache rows are kept out of the calls, hit rates, ceilings and verdict counts (they serve no
prompt); their storage and creation are in the total cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._ledger._usage_record import UsageRecord
from .._policy import explicit_cache_rule
from .._recording._gemini_caches import CACHE_DETAIL

__all__ = ["CacheStorage", "ExplicitCacheTotals", "ExplicitCaches", "break_even_note",
           "is_cache_operation"]


def is_cache_operation(record: UsageRecord) -> bool:
    """Whether ``record`` is a Gemini explicit-cache call (create / update / delete)."""
    return isinstance(record.verdict_detail.get(CACHE_DETAIL), dict)


def _ok(record: UsageRecord) -> bool:
    return record.status_code is not None and 200 <= record.status_code < 300 and \
        record.error_class is None


@dataclass
class CacheStorage:
    """One explicit cache of the ledger.

    Attributes:
        name: ``cachedContents/...``.
        model: Its model.
        tokens: Its tokens (the create answer's ``totalTokenCount``), ``None`` if unknown.
        created: When it was created (the create row's time), ``None`` without a create row.
        hours: How long it lived (hours): create to its last expiry, or to its delete.
        deleted: A delete row ended it.
        operations: Its cache-call rows (create, updates, delete; failed ones included).
        reads: Prompt requests (2xx) that named it.
        read_tokens: Their cache-read tokens, at most its tokens each.
        storage_usd: Storage for its life (USD), ``None`` when the price is unknown.
        creation_usd: Its tokens at the fresh-input price (USD), ``None`` when unknown.
        break_even_reads: Reads its life needed to pay for its storage, ``None`` if unknown.
        source: Where its prices come from (the explicit-cache rule's source and date).
    """

    name: str
    model: str | None = None
    tokens: int | None = None
    created: datetime | None = None
    hours: float = 0.0
    deleted: bool = False
    operations: int = 0
    reads: int = 0
    read_tokens: int = 0
    storage_usd: float | None = None
    creation_usd: float | None = None
    break_even_reads: int | None = None
    source: str = ""

    @property
    def paid_off(self) -> bool | None:
        """Whether the reads it served reach its break-even, ``None`` when unknown."""
        return None if self.break_even_reads is None else self.reads >= self.break_even_reads

    def to_json(self) -> dict[str, Any]:
        """Every attribute (``created`` in ISO 8601, USD to 6 digits, hours to 4) and
        ``paid_off``."""
        return {"name": self.name, "model": self.model, "tokens": self.tokens,
                "created": None if self.created is None else self.created.isoformat(),
                "hours": round(self.hours, 4), "deleted": self.deleted,
                "operations": self.operations, "reads": self.reads,
                "read_tokens": self.read_tokens,
                "storage_usd": None if self.storage_usd is None else round(self.storage_usd, 6),
                "creation_usd": None if self.creation_usd is None
                else round(self.creation_usd, 6),
                "break_even_reads": self.break_even_reads, "paid_off": self.paid_off,
                "source": self.source}


@dataclass
class ExplicitCacheTotals:
    """The explicit caches of a set of records (module docstring).

    Attributes:
        caches: One entry per cache, in order of first row.
        storage_usd: Their storage (USD), ``None`` when none could be priced or pricing was
            not asked; a lower bound when ``unpriced`` > 0.
        creation_usd: Their creation (USD), the same way.
        unpriced: Caches whose storage or creation price is unknown.
    """

    caches: list[CacheStorage] = field(default_factory=list)
    storage_usd: float | None = None
    creation_usd: float | None = None
    unpriced: int = 0

    @property
    def usd(self) -> float | None:
        """Storage plus creation (USD), ``None`` when neither is known."""
        if self.storage_usd is None and self.creation_usd is None:
            return None
        return (self.storage_usd or 0.0) + (self.creation_usd or 0.0)

    def to_json(self) -> dict[str, Any]:
        """``{"caches": [...], "storage_usd", "creation_usd", "unpriced"}``."""
        return {"caches": [c.to_json() for c in self.caches],
                "storage_usd": None if self.storage_usd is None else round(self.storage_usd, 6),
                "creation_usd": None if self.creation_usd is None
                else round(self.creation_usd, 6),
                "unpriced": self.unpriced}


@dataclass
class _Life:
    entry: CacheStorage
    start: float | None = None
    end: float | None = None


class ExplicitCaches:
    """Accumulates the cache rows and the reads of a ledger, one record at a time (memory in
    proportion to the number of caches)."""

    def __init__(self) -> None:
        self._lives: dict[str, _Life] = {}
        self.rows = 0  # cache-call rows seen

    def _life(self, name: str) -> _Life:
        life = self._lives.get(name)
        if life is None:
            life = self._lives[name] = _Life(CacheStorage(name))
        return life

    def add(self, record: UsageRecord) -> bool:
        """Note ``record``: a cache call (returns True: it is no prompt call) or a prompt
        request that read a cache (counted; returns False, it stays a call)."""
        facts = record.verdict_detail.get(CACHE_DETAIL)
        if not isinstance(facts, dict):
            name = record.verdict_detail.get("cached_content")
            if isinstance(name, str) and _ok(record):
                entry = self._life(name).entry
                entry.reads += 1
                read = record.cache_read_tokens or 0
                entry.read_tokens += min(read, entry.tokens) if entry.tokens else read
            return False
        self.rows += 1
        name = facts.get("name")
        if not isinstance(name, str):
            return True
        life = self._life(name)
        entry = life.entry
        entry.operations += 1
        entry.model = entry.model or record.model
        if not _ok(record):
            return True
        ts = record.ts_utc.timestamp()
        op, ttl, tokens = facts.get("op"), facts.get("ttl_s"), facts.get("tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
            entry.tokens = tokens  # a negative count is no count: never a negative price
        if not (isinstance(ttl, (int, float)) and not isinstance(ttl, bool)
                and math.isfinite(ttl) and ttl >= 0):
            ttl = None  # no duration (a hand-edited row: inf, NaN, negative): as if unset
        if op == "create":
            entry.created, life.start = record.ts_utc, ts
            if ttl is None:
                ttl = explicit_cache_rule(record.model or "").default_ttl_s or 3600
        if op in ("create", "update") and ttl is not None:
            life.end = ts + float(ttl)
        elif op == "delete":
            entry.deleted = True
            life.end = ts if life.end is None else min(life.end, ts)
        return True

    def created_tokens(self, record: UsageRecord) -> int:
        """The tokens of the explicit cache ``record`` reads (``cached_content``) when this
        ledger holds its successful create row and its token count, else 0: what the call
        can read without any earlier prompt call (its ceiling's lower bound)."""
        name = record.verdict_detail.get("cached_content")
        life = self._lives.get(name) if isinstance(name, str) else None
        if life is None or life.start is None or life.entry.tokens is None:
            return 0
        return life.entry.tokens

    def totals(self, *, price: bool = True) -> ExplicitCacheTotals:
        """The caches noted so far, priced (``price``) with their model's explicit-cache
        rule."""
        out = ExplicitCacheTotals()
        storage = creation = 0.0
        priced_storage = priced_creation = 0
        for life in self._lives.values():
            entry = life.entry
            if life.start is not None and life.end is not None:
                entry.hours = max(life.end - life.start, 0.0) / 3600
            rule = explicit_cache_rule(entry.model or "")
            entry.source = f"{rule.source} (as of {rule.as_of})"
            if price and entry.tokens is not None and life.start is not None:
                entry.storage_usd = rule.storage_usd(entry.tokens, entry.hours)
                fresh = rule.input_usd_per_mtok
                entry.creation_usd = None if fresh is None else entry.tokens / 1e6 * fresh
                entry.break_even_reads = rule.break_even_reads(entry.tokens, entry.hours)
            if price and (entry.storage_usd is None or entry.creation_usd is None):
                out.unpriced += 1
            if entry.storage_usd is not None:
                storage += entry.storage_usd
                priced_storage += 1
            if entry.creation_usd is not None:
                creation += entry.creation_usd
                priced_creation += 1
            out.caches.append(entry)
        out.storage_usd = storage if priced_storage else None
        out.creation_usd = creation if priced_creation else None
        return out


def break_even_note(entry: CacheStorage) -> str:
    """``"break-even 2 reads in its 0.08 h: paid off (4 served)"`` or why it is unknown: no
    create row (its life is unknown), its token count unknown, or no price."""
    if entry.break_even_reads is None:
        if entry.created is None:
            return ("break-even unknown (no create row in this ledger: created by another "
                    "process or before the ledger, its life is unknown)")
        if entry.tokens is None:
            return "break-even unknown (the create answer gave no token count)"
        return "break-even unknown (no storage or read price for its model)"
    verdict = "paid off" if entry.paid_off else "not paid off"
    reads = entry.break_even_reads
    return (f"break-even {reads:,} read{'s' if reads != 1 else ''} in its "
            f"{entry.hours:.2f} h: {verdict} ({entry.reads:,} served)")
