"""Rows a follower may have read past: insertion-order numbers missing between the rows it read.

A follower (``Ledger.records_after``, ``stableprompt report --follow``) reads the rows stored
after the last insertion-order number it saw. On SQLite that number (``rowid``) is taken under
the write lock, which the inserting transaction holds until it commits, so no row can appear
later below a number already read past. On PostgreSQL it is a sequence value (``seq``), taken
when the insert starts: with several writers (hosts, proxy workers), a row can commit after a
row with a higher ``seq``, and a follower that only reads ``seq > last`` never shows it.

:class:`LateRows` remembers the numbers missing between the rows read (as ranges) and for how
long they have been missing; ``Ledger.records_after`` reads them again on each call until a
row fills them or they are older than :attr:`LateRows.wait_s`. A number can also be missing for
good: the sequence value of an insert that was rolled back, or that an ``ON CONFLICT DO
NOTHING`` (a replayed record already stored) consumed. So a row whose insert commits more than
``wait_s`` after a row with a higher number is still not shown; :attr:`LateRows.given_up`
counts the numbers no longer watched (those are mostly the permanent kind).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

__all__ = ["LATE_WAIT_S", "MAX_RANGES", "LateRows"]

LATE_WAIT_S = 300.0
"""Seconds a missing insertion-order number is read again (a ledger write is one short
statement; a replayed spill file is written in batches of seconds)."""
MAX_RANGES = 1_000
"""Ranges of missing numbers watched at once; beyond, the oldest are given up first (a replay
of many records already stored leaves one range per record)."""


class LateRows:
    """The insertion-order numbers a follower read past without a row (module docstring).

    Args:
        wait_s: Seconds each missing number is read again.
        clock: Monotonic seconds (tests pass their own).
    """

    def __init__(self, wait_s: float = LATE_WAIT_S, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.wait_s = wait_s
        self._clock = clock
        self._ranges: list[tuple[int, int, float]] = []  # (first, last, since), sorted
        self.given_up = 0
        """Numbers no longer watched (older than ``wait_s``, or beyond :data:`MAX_RANGES`)."""

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """The watched ranges, ``(first, last)`` inclusive, in order (after :meth:`expire`)."""
        return [(first, last) for first, last, _ in self._ranges]

    def expire(self) -> None:
        """Give up the ranges missing for longer than :attr:`wait_s`, then the oldest beyond
        :data:`MAX_RANGES`."""
        now = self._clock()
        kept = []
        for first, last, since in self._ranges:
            if now - since > self.wait_s:
                self.given_up += last - first + 1
            else:
                kept.append((first, last, since))
        if len(kept) > MAX_RANGES:
            by_age = sorted(kept, key=lambda item: item[2])
            cut = len(kept) - MAX_RANGES
            self.given_up += sum(last - first + 1 for first, last, _ in by_age[:cut])
            kept = sorted(by_age[cut:])
        self._ranges = kept

    def read_past(self, after: int, numbers: Iterable[int]) -> None:
        """Note the numbers missing in a read of the rows after ``after`` that returned
        ``numbers`` (ascending): each gap becomes a watched range."""
        now = self._clock()
        previous = after
        for number in numbers:
            if number > previous + 1:
                self._ranges.append((previous + 1, number - 1, now))
            previous = max(previous, number)

    def filled(self, numbers: Iterable[int]) -> None:
        """Rows were found at ``numbers`` (ascending): the ranges holding them are split."""
        found = sorted(set(numbers))
        if not found:
            return
        kept = []
        for first, last, since in self._ranges:
            start = first
            for number in found:
                if number < start or number > last:
                    continue
                if number > start:
                    kept.append((start, number - 1, since))
                start = number + 1
            if start <= last:
                kept.append((start, last, since))
        self._ranges = kept
