"""The emulator's prefix-cache store: prefix hash -> entry, with TTL, LRU capacity and staging.

An entry stands for the provider's K/V of one exact prefix (identified by the chained hash of
every block up to a boundary, see :mod:`._prompt`). Entries a request writes are *staged* and
become visible only when :meth:`PrefixStore.publish` runs, which the HTTP layer calls right
after the response headers are sent: Anthropic documents that "a cache entry only becomes
available after the first response begins", so concurrent identical requests each pay the write
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching).

Lifetimes are measured from the start of the writing (or reading) request, in seconds of the
emulator's clock. Capacity is enforced least-recently-used first, by entry count and/or by the
sum of entry prefix lengths (tokens).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from .._exceptions import InputError

__all__ = ["PendingWrite", "PrefixStore", "StoreStats"]


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """A cache write staged by a request.

    Attributes:
        key: Chained prefix hash (bytes) naming the prefix.
        tokens: Length of the prefix (tokens).
        ttl_s: Lifetime (seconds) from ``written_at``.
        written_at: Clock time (seconds) at which the writing request started.
    """

    key: bytes
    tokens: int
    ttl_s: float
    written_at: float


@dataclass(slots=True)
class _Entry:
    tokens: int
    ttl_s: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counters of the store since creation (or the last :meth:`PrefixStore.clear`).

    Attributes:
        entries: Live entries now (expired ones not yet swept may be included).
        tokens: Sum of the prefix lengths (tokens) of those entries.
        capacity_entries: Entry limit, ``None`` for none.
        capacity_tokens: Token limit, ``None`` for none.
        reads: Entry lookups that hit.
        writes: Entries published.
        evictions: Entries dropped for capacity (LRU).
        expirations: Entries found expired and dropped.
    """

    entries: int
    tokens: int
    capacity_entries: int | None
    capacity_tokens: int | None
    reads: int
    writes: int
    evictions: int
    expirations: int


class PrefixStore:
    """Thread-safe LRU map of prefix hash -> cache entry with TTLs.

    Callers that need several lookups to be atomic (one request's accounting) hold
    :attr:`lock` (re-entrant) around them.

    Args:
        capacity_entries: Maximum number of entries (``None``: unlimited).
        capacity_tokens: Maximum sum of entry prefix lengths in tokens (``None``: unlimited).

    Raises:
        InputError: A capacity is below 1 (code ``emulator-capacity``).
    """

    def __init__(
        self, *, capacity_entries: int | None = 100_000, capacity_tokens: int | None = None
    ) -> None:
        for name, value in (("capacity_entries", capacity_entries),
                            ("capacity_tokens", capacity_tokens)):
            if value is not None and value < 1:
                raise InputError(f"{name} must be >= 1 or None, got {value}",
                                 code="emulator-capacity")
        self.lock = threading.RLock()
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._capacity_entries = capacity_entries
        self._capacity_tokens = capacity_tokens
        self._tokens = 0
        self._reads = self._writes = self._evictions = self._expirations = 0

    def find(self, key: bytes, now: float) -> int | None:
        """Return the prefix length (tokens) of the live entry ``key``, else ``None``.

        Expired entries are dropped. A hit does not refresh the entry; see :meth:`refresh`.
        """
        with self.lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if now >= entry.expires_at:
                self._drop(key, entry)
                self._expirations += 1
                return None
            self._reads += 1
            return entry.tokens

    def read(self, candidates: Iterable[tuple[bytes, int]], now: float) -> int:
        """Read the first candidate with a live entry, in the order given.

        Args:
            candidates: ``(prefix hash, prefix length in tokens)`` pairs, most preferred
                first (callers pass the longest prefix first). Consumed lazily: the search
                stops at the first hit.
            now: Clock time (seconds) of the reading request.

        Returns:
            The hit's prefix length (tokens), its entry refreshed from ``now``; 0 when no
            candidate has a live entry. Counters move as for :meth:`find`.
        """
        with self.lock:
            for key, tokens in candidates:
                if self.find(key, now) is not None:
                    self.refresh(key, now)
                    return tokens
        return 0

    def refresh(self, key: bytes, now: float) -> None:
        """Restart the TTL of entry ``key`` from ``now`` and mark it most recently used."""
        with self.lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.expires_at = max(entry.expires_at, now + entry.ttl_s)
                self._entries.move_to_end(key)

    def publish(self, writes: Iterable[PendingWrite]) -> None:
        """Make staged writes visible, then evict least-recently-used entries over capacity.

        A write over an existing entry keeps the later expiry and the longer TTL.
        """
        with self.lock:
            for write in writes:
                expires_at = write.written_at + write.ttl_s
                old = self._entries.pop(write.key, None)
                if old is not None:
                    self._tokens -= old.tokens
                    if old.expires_at > write.written_at:
                        expires_at = max(expires_at, old.expires_at)
                ttl_s = max(write.ttl_s, old.ttl_s) if old is not None else write.ttl_s
                self._entries[write.key] = _Entry(write.tokens, ttl_s, expires_at)
                self._tokens += write.tokens
                self._writes += 1
            self._evict()

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self.lock:
            self._entries.clear()
            self._tokens = 0
            self._reads = self._writes = self._evictions = self._expirations = 0

    def stats(self) -> StoreStats:
        """A snapshot of the counters."""
        with self.lock:
            return StoreStats(
                entries=len(self._entries),
                tokens=self._tokens,
                capacity_entries=self._capacity_entries,
                capacity_tokens=self._capacity_tokens,
                reads=self._reads,
                writes=self._writes,
                evictions=self._evictions,
                expirations=self._expirations,
            )

    def _drop(self, key: bytes, entry: _Entry) -> None:
        del self._entries[key]
        self._tokens -= entry.tokens

    def _evict(self) -> None:
        cap_n, cap_t = self._capacity_entries, self._capacity_tokens
        while self._entries and (
            (cap_n is not None and len(self._entries) > cap_n)
            or (cap_t is not None and self._tokens > cap_t)
        ):
            key, entry = next(iter(self._entries.items()))
            self._drop(key, entry)
            self._evictions += 1
