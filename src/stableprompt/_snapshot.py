"""Snapshot: a read-only sequence over the first items of append-only lists, in O(1).

A conversation's history and segment lists only ever grow at the end (compaction and forks
make new lists), so a render can hold ``(list, length)`` instead of copying the list into a
tuple: copying 2,000 messages and their segments took ~16 us per turn at turn 1,000, the one
part of ``Conversation.render`` that grew with the conversation. Items appended after the
snapshot are invisible to it; slices and ``tuple()`` give tuples.

The recorder's segmented requests are snapshots too (:meth:`Snapshot.first`,
:meth:`Snapshot.then`): a request repeating its predecessor's segments holds one list that
the requests of its conversation share, plus its own new segments, so what a request adds to
the containers the garbage collector traverses grows with what is new in it, not with the
conversation (a tuple of every segment per request cost a 3,000-message conversation ~0.8 ms
per young collection, on the caller's thread wherever one landed).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

__all__ = ["Snapshot"]

_T = TypeVar("_T")


class _Shared(list[_T]):
    """A list made by :meth:`Snapshot.then` for snapshots to share: only ``then`` appends to
    it (under :data:`_EXTENDING`), so no other writer can interleave with its appends."""

    __slots__ = ()


_EXTENDING = threading.Lock()
"""Held while :meth:`Snapshot.then` checks a shared list's length and appends to it."""


class Snapshot(Sequence[_T]):
    """The first ``length`` items of each part, concatenated, frozen at construction.

    Args:
        parts: ``(sequence, length)`` pairs; each sequence must not change in its first
            ``length`` items afterwards (append-only lists, tuples).

    Compares equal to any sequence (not a str) with the same items, e.g. a tuple. Reading an
    item of the first part is the fast path (one check, no loop over the parts).
    """

    __slots__ = ("_first", "_first_len", "_len", "_parts")

    def __init__(self, *parts: tuple[Sequence[_T], int]) -> None:
        self._parts = tuple((seq, n) for seq, n in parts if n)
        self._len = sum(n for _, n in self._parts)
        self._first: Sequence[_T] = self._parts[0][0] if self._parts else ()
        self._first_len = self._parts[0][1] if self._parts else 0

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> _T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[_T, ...]: ...
    def __getitem__(self, index: int | slice) -> _T | tuple[_T, ...]:
        if type(index) is int:  # the hot path: binary searches read single items
            if 0 <= index < self._first_len:
                return self._first[index]
            if index < 0:
                index += self._len
        elif isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            if step != 1:
                return tuple(self)[index]
            out: list[_T] = []
            offset = 0
            for seq, n in self._parts:
                lo, hi = max(start - offset, 0), min(stop - offset, n)
                if lo < hi:
                    out.extend(seq[lo:hi])
                offset += n
            return tuple(out)
        elif not isinstance(index, int):
            raise TypeError(f"indices must be integers or slices, not {type(index).__name__}")
        elif index < 0:  # an int subclass (bool)
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("Snapshot index out of range")
        for seq, n in self._parts:
            if index < n:
                return seq[index]
            index -= n
        raise AssertionError("unreachable")  # pragma: no cover

    def __iter__(self) -> Iterator[_T]:
        # islice always: a part may be a list that grows while it is iterated
        return itertools.chain.from_iterable(
            itertools.islice(seq, n) for seq, n in self._parts)

    def __reversed__(self) -> Iterator[_T]:
        for i in range(self._len - 1, -1, -1):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to tuples, like a list

    def __repr__(self) -> str:
        return f"Snapshot({tuple(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))

    def shared_prefix(self, other: object) -> int:
        """How many leading items this snapshot and ``other`` hold as the same objects, known
        without reading any: those of the first list both read (two requests of one
        conversation), ``0`` when ``other`` is no snapshot or reads another list."""
        if type(other) is Snapshot and other._first is self._first:
            return min(self._first_len, other._first_len)
        return 0

    def first(self, count: int) -> Snapshot[_T]:
        """The first ``count`` items (``0 <= count <= len(self)``) over the same parts:
        nothing copied, O(parts)."""
        kept: list[tuple[Sequence[_T], int]] = []
        for seq, n in self._parts:
            if count <= 0:
                break
            kept.append((seq, min(n, count)))
            count -= n
        return Snapshot(*kept)

    def then(self, tail: Sequence[_T]) -> Snapshot[_T]:
        """These items followed by ``tail`` (held as given, not copied), as a snapshot of two
        parts: a shared list holding these items, then ``tail``.

        The shared list is this snapshot's first part when that is one (made by an earlier
        ``then``) and it agrees with these items: past this snapshot's part of it, it holds
        the same objects as the other parts where it has items at all (nothing appended, or
        the same items by another snapshot), and the ones it lacks are appended to it.
        Otherwise (the first call, or a fork: another snapshot appended other items) these
        items are copied into a new one. Snapshots made earlier over the list never see what
        is appended. Cost: the items outside the first part (the previous request's own
        tail), plus a copy of all items on a first call or a fork.
        """
        parts, shared = self._parts, None
        if parts and type(parts[0][0]) is _Shared:
            first, n = parts[0]
            assert isinstance(first, _Shared)
            more = [item for seq, k in parts[1:] for item in itertools.islice(seq, k)]
            with _EXTENDING:
                # zip stops at the shorter: the items the list already has past ``n``
                if all(a is b for a, b in zip(itertools.islice(first, n, n + len(more)), more,
                                              strict=False)):
                    first.extend(more[len(first) - n:])
                    shared = first
        if shared is None:
            shared = _Shared(self)
        return Snapshot((shared, self._len), (tail, len(tail)))
