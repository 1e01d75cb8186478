"""The append-only ceiling of each call (``_summary``'s module docstring, ``ceiling``).

:class:`Ceilings` walks the calls in ledger order and keeps, per cache key (provider, model,
wire format, scenario, session), the previous request's size and send time, and per record
id the same for calls a later call of another session names as its predecessor. Moved here
from ``_summary`` (issue 30) so the in-memory :func:`~._summary.summarize` and the streaming
report (``_builder``) share it. It remembers every call by id (the predecessor a later call
names, of any session or agent): about 200 bytes per call, the one per-call state of a
streaming pass. With ``bounded=True`` (the streaming report) at most :data:`CALLS_IN_MEMORY`
calls and :data:`KEYS_IN_MEMORY` cache keys stay in memory, the rest in a temporary file
(``_spill``): the same ceilings, memory that does not grow with calls.
"""

from __future__ import annotations

import marshal
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .._frozen import slotted_maker
from .._ledger._usage_record import UsageRecord
from .._policy import CacheRules, PolicyTable, cache_rules
from ._spill import SpillMap

__all__ = ["CALLS_IN_MEMORY", "KEYS_IN_MEMORY", "Ceilings", "policy_of", "ttl_of"]

CALLS_IN_MEMORY = 500_000
"""Calls a bounded :class:`Ceilings` remembers by record id in memory (about 250 bytes each:
~125 MB); the rest are moved to a temporary file and read back when a later call names one
(``_spill``). A ledger of fewer calls never touches the disk. Sized so that a week of a
team's calls mostly stays in memory: each call moved out costs ~5 us of CPU (measured on a
1M-call ledger, ``benchmarks/RESULTS.md``), while the whole bound stays far under the
report's 1 GB budget."""
KEYS_IN_MEMORY = 200_000
"""Cache keys (sessions, and each subagent of a session) whose previous request a bounded
:class:`Ceilings` keeps in memory (about 300 bytes each: ~60 MB); the rest as above."""


def policy_of(provider: str | None, model: str | None,
            policies: PolicyTable | None) -> CacheRules | None:
    """The call's cache policy, ``None`` for unknown providers (minimum 0, granularity 1,
    no TTL)."""
    try:
        return cache_rules(provider or "", model or "", policies)
    except LookupError:
        return None


def ttl_of(record: UsageRecord, policy: CacheRules | None) -> int | None:
    """The TTL (seconds) of ``record``'s cache entries: ``verdict_detail["ttl_s"]`` (what the
    request chose), else the policy's default; ``None``: no TTL."""
    value = record.verdict_detail.get("ttl_s")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None if policy is None else policy.default_ttl_s


@dataclass(frozen=True, slots=True)
class _Seen:
    """What the ceiling needs of an earlier call: its session key, send time, size."""

    key: tuple[str, ...]
    ts: datetime
    total: int


_seen = slotted_maker(_Seen)
"""``_Seen(...)``, faster (``_frozen.slotted_maker``): one per call."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _seen_bytes(seen: _Seen) -> bytes:
    """A :class:`_Seen` moved to the spill file: its send time as microseconds since the
    epoch (exact; only its differences from other times are used), ``marshal``-ed."""
    return marshal.dumps((seen.key, (seen.ts - _EPOCH) // _US, seen.total))


def _seen_of(data: bytes) -> _Seen:
    key, micros, total = marshal.loads(data)
    return _seen(key, _EPOCH + timedelta(microseconds=micros), total)


class Ceilings:
    """The append-only ceiling of each call in ledger order (module docstring, ``ceiling``):
    the best of its session's previous request and the prefix it shares with another session's
    call (its ``predecessor_id``), either only within the TTL, and never less than what the
    call read (a read proves the prefix was there; :attr:`beyond_ledger` counts the calls whose
    read no earlier call of the selection explains)."""

    def __init__(self, *, bounded: bool = False) -> None:
        self._last: SpillMap[tuple[str, ...], _Seen] = SpillMap(
            KEYS_IN_MEMORY if bounded else None, key_text=repr, encode=_seen_bytes,
            decode=_seen_of)
        self._by_id: SpillMap[str, _Seen] = SpillMap(
            CALLS_IN_MEMORY if bounded else None, encode=_seen_bytes, decode=_seen_of)
        self.beyond_ledger = 0

    @property
    def spilled(self) -> int:
        """Entries moved to the temporary file so far (0: it was never opened)."""
        return self._last.spilled + self._by_id.spilled

    def close(self) -> None:
        """Delete the temporary file, if any (``_spill``): the pass is over."""
        self._last.close()
        self._by_id.close()

    @staticmethod
    def key(record: UsageRecord, scenario: str, session: str) -> tuple[str, ...]:
        """The cache a call can read from: one provider's, for one model and wire format
        (Anthropic and OpenAI caches are per model; one provider never reads another's), of
        one session of one scenario. Merged ledgers that reuse session ids across providers
        keep their ceilings apart."""
        return (record.provider or "", record.model or "", record.wire_format or "",
                scenario, session)

    def total_of(self, record_id: str | None) -> int | None:
        """The input total of an earlier call of the selection (``None``: not seen)."""
        if not record_id:  # no record has an empty id
            return None
        seen = self._by_id.get(record_id)
        return None if seen is None else seen.total

    def next(self, record: UsageRecord, key: tuple[str, ...],
             policy: CacheRules | None, explicit: int = 0) -> int:
        """The ceiling (tokens) of ``record`` (of cache key ``key``, :meth:`key`), then
        remember it as an earlier call. A call whose size is unknown or implausible has
        ceiling 0 and bounds nothing later. ``explicit``: the tokens of a Gemini explicit
        cache the call names and the selection saw created (it can read them whole)."""
        total = record.input_tokens_total
        if total is None or record.usage_inconsistent:
            return 0
        ttl = ttl_of(record, policy)
        best = 0
        before = self._last.get(key)
        if before is not None and _alive(before, record.ts_utc, ttl):
            best = min(before.total, total)
        other = None if not record.predecessor_id else self._by_id.get(record.predecessor_id)
        if (other is not None and other.key != key and other.key[:3] == key[:3]
                and _alive(other, record.ts_utc, ttl)):
            shared = record.verdict_detail.get("lcp_tokens_scaled", record.lcp_tokens)
            if isinstance(shared, int) and not isinstance(shared, bool):
                best = max(best, min(shared, other.total, total))
        # The request size is known (even when its reads are not): it bounds later calls.
        if before is not None:  # one tuple per cache key, not one per call
            key = before.key
        seen = _seen(key, record.ts_utc, total)
        self._last[key] = self._by_id[record.record_id] = seen
        granularity = policy.granularity_tokens if policy is not None else 1
        minimum = policy.min_cacheable_tokens if policy is not None else 0
        best = best // granularity * granularity
        best = best if best >= minimum else 0
        best = max(best, min(explicit, total))  # an explicit cache is read whole
        read = record.cache_read_tokens
        if read is not None and read > best:  # read from a call the selection does not hold
            self.beyond_ledger += 1          # (or a prefix the recorder did not compare)
            best = min(read, total)
        return best


def _alive(earlier: _Seen, now: datetime, ttl_s: int | None) -> bool:
    return ttl_s is None or (now - earlier.ts).total_seconds() <= ttl_s
