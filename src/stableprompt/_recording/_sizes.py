"""Cache entry sizes the provider reported, by the prefix they end: exact anchors.

Anthropic and Bedrock report one write count for all of a request's cache breakpoints, so
the size of an entry ending at an earlier breakpoint is first reported when a later call
reads it; until then a prediction of that read is the nearest *reported* size less our
estimate of what lies between (``_attribution._Attributor.anchor``). The nearer the reported
size, the less is estimated: the predecessor's own extent can be a whole conversation away
(a resumed session whose first message changed reads up to its system breakpoint, while the
predecessor reported only the end of its long history), but the conversation's first call
reported the end of its first message, one block after that breakpoint.

So every call's usage names exact sizes (:func:`sizes_of`): ``cache_read + cache_write`` is
the size of the prefix up to its last cache breakpoint, and a read that matched the
predicted entry is the size of that entry. :class:`ReportedSizes` keeps them by the
prefix's chained digest (its first :data:`~._outline.DIGEST_HEX` hex digits, as a ledger
row's outline keeps them: the chain starts with the model, so a key names one model's
prefix), for the recorder (calls it finished, rows it read from its ledger), bounded
(least recently used dropped).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

from .._ledger._usage_record import UsageRecord
from .._policy import PolicyTable
from .._segment import Segment
from ._call import RequestState
from ._outline import DIGEST_HEX

__all__ = ["MAX_SIZES", "ReportedSizes", "extent_size", "row_sizes", "size_key"]

MAX_SIZES = 16_384
"""Reported sizes a recorder keeps (about 4 MB: 3.9 MB measured with ``tracemalloc``, 32-hex
keys and sizes above 256 tokens)."""


def size_key(prefix_digest: str) -> str:
    """The key of a prefix: the first :data:`~._outline.DIGEST_HEX` hex digits of its
    chained digest (full or as an outline keeps it)."""
    return prefix_digest[:DIGEST_HEX]


def extent_size(last_breakpoint: Segment | None, read: int, write: int
                ) -> tuple[tuple[str, int], ...]:
    """The size a call's usage reports on a breakpoint cache: ``cache_read + cache_write`` is
    the prefix up to its request's last breakpoint (the longest: written, or read, whenever
    anything is), keyed by that segment; ``()`` without a breakpoint or when nothing was
    read or written. The one rule for a call this recorder finished
    (``_attribution._Attributor.reported_sizes``) and a ledger row (:func:`row_sizes`)."""
    if last_breakpoint is None or read + write <= 0:
        return ()
    return ((size_key(last_breakpoint.prefix_digest), read + write),)


def row_sizes(row: UsageRecord, state: RequestState,
              policies: PolicyTable) -> tuple[tuple[str, int], ...]:
    """The entry size a ledger row reports (another process's call, or this one's before a
    restart): ``cache_read + cache_write`` up to its request's last breakpoint (``state``: the
    row as a predecessor, its stored segments or outline), on a breakpoint cache (its
    provider and model in ``policies``; not an automatic cache, whose reads end at a granule),
    not from a suspect usage report; ``()`` otherwise (a row's read entry is not stored)."""
    read, write = row.cache_read_tokens, row.cache_write_tokens
    if read is None or write is None or row.verdict_detail.get("usage_suspect"):
        return ()
    try:
        if policies.lookup(row.provider or "", row.model or "").automatic:
            return ()
    except Exception:  # no policy for it: no size taken
        return ()
    segments = (state.segmented.segments if state.segmented is not None else state.outline)
    return extent_size(next((s for s in reversed(segments or ()) if s.breakpoint), None),
                       read, write)


class ReportedSizes:
    """Provider tokens of prefixes whose size the provider reported, by :func:`size_key`.

    Thread-safe: a recorder finishes calls on its callers' threads, and :meth:`add`'s store,
    move and drop are three operations; a drop between another thread's store and move (or
    two threads' drops after one store) would raise ``KeyError``. CPython 3.11 with the GIL
    did not interleave them in 800,000 concurrent adds; a lock makes that no assumption.

    Args:
        limit: Sizes kept; the least recently used is dropped beyond it.
    """

    def __init__(self, limit: int = MAX_SIZES) -> None:
        self._sizes: OrderedDict[str, int] = OrderedDict()
        self._limit = max(limit, 0)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sizes)

    def get(self, key: str) -> int | None:
        """The reported size (provider tokens) of the prefix ``key`` names, or ``None``."""
        return self._sizes.get(key)

    def add(self, sizes: Iterable[tuple[str, int]]) -> None:
        """Keep ``(key, provider tokens)`` pairs (a later report of a key replaces it)."""
        table = self._sizes
        kept = [(key, tokens) for key, tokens in sizes if tokens > 0]
        if not kept:
            return
        with self._lock:
            for key, tokens in kept:
                table[key] = tokens
                table.move_to_end(key)
                while len(table) > self._limit:
                    table.popitem(last=False)
