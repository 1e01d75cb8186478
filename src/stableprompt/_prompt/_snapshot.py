"""Snapshot: a read-only sequence over the first items of append-only lists, in O(1).

A conversation's history and segment lists only ever grow at the end (compaction and forks
make new lists), so a render can hold ``(list, length)`` instead of copying the list into a
tuple: copying 2,000 messages and their segments took ~16 us per turn at turn 1,000, the one
part of ``Conversation.render`` that grew with the conversation. Items appended after the
snapshot are invisible to it; slices and ``tuple()`` give tuples.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

__all__ = ["Snapshot"]

_T = TypeVar("_T")


class Snapshot(Sequence[_T]):
    """The first ``length`` items of each part, concatenated, frozen at construction.

    Args:
        parts: ``(sequence, length)`` pairs; each sequence must not change in its first
            ``length`` items afterwards (append-only lists, tuples).

    Compares equal to any sequence (not a str) with the same items, e.g. a tuple.
    """

    __slots__ = ("_len", "_parts")

    def __init__(self, *parts: tuple[Sequence[_T], int]) -> None:
        self._parts = tuple((seq, n) for seq, n in parts if n)
        self._len = sum(n for _, n in self._parts)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> _T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[_T, ...]: ...
    def __getitem__(self, index: int | slice) -> _T | tuple[_T, ...]:
        if isinstance(index, slice):
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
        if not isinstance(index, int):
            raise TypeError(f"indices must be integers or slices, not {type(index).__name__}")
        if index < 0:
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
