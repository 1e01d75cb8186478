"""Segments and chained prefix fingerprints.

A prompt is an ordered list of segments (a tool, a system block, a message or content block,
a tail slot, a cache-key parameter). Each segment's digest is chained with its predecessor's::

    d_0 = SHA-256("sp1")
    d_i = SHA-256(d_{i-1} || kind || 0x00 || bytes_i)

so ``prefix_digest`` of segment *i* names the whole prefix up to and including *i*, and two
prompts share a cacheable prefix exactly as far as their chains agree. Fingerprints are the hex
digest tagged with the version of the algorithm and of the canonical forms it hashes:
``sp2:<64 hex>`` (:data:`FINGERPRINT_TAG`). Changing either requires a new tag.

What requests share, they hold once: segment bytes as shared pieces (:class:`SegmentBytes`),
and lists of segments (or messages, or history items) as :class:`Snapshot` views over the
first items of append-only lists.

A conversation's history and segment lists only ever grow at the end (compaction and forks
make new lists), so a render can hold ``(list, length)`` instead of copying the list into a
tuple: copying 2,000 messages and their segments took ~16 us per turn at turn 1,000, the one
part of ``Conversation.render`` that grew with the conversation. Items appended after the
snapshot are invisible to it; slices and ``tuple()`` give tuples. The recorder's segmented
requests are snapshots too (:meth:`Snapshot.first`, :meth:`Snapshot.then`): a request
repeating its predecessor's segments holds one list that the requests of its conversation
share, plus its own new segments, so what a request adds to the containers the garbage
collector traverses grows with what is new in it, not with the conversation (a tuple of
every segment per request cost a 3,000-message conversation ~0.8 ms per young collection,
on the caller's thread wherever one landed).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import operator
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, SupportsIndex, TypeVar, overload

from ._public import public

__all__ = [
    "FINGERPRINT_TAG",
    "HEAD_KINDS",
    "ByteSlices",
    "HeadedSegments",
    "Segment",
    "SegmentBytes",
    "SegmentSpec",
    "Snapshot",
    "build_segments",
    "chain",
    "chain_pieces",
    "fingerprint_of",
    "new_segment",
    "new_spec",
    "rechain",
    "sum_tokens",
    "tag",
]

FINGERPRINT_TAG = "sp2"
"""The fingerprint version. ``sp2`` (0.2): tool schemas, and response schemas sent as
cache-key parameters (``response_format``, ``text.format``), keep ``properties`` in authored
order (``_wire._schema_order``), so a rendered head holding one in another order than sorted
has other bytes than under ``sp1``. The chain itself (seed and hashing) is unchanged: a request
recorded as sent has the same hex digests under both tags."""
_ROOT = hashlib.sha256(b"sp1").digest()  # the chain seed, unchanged since sp1
_SHA256 = hashlib.sha256

#: Segment kinds, in the order a provider caches them.
KINDS = ("param", "tool", "system", "message", "tail")
HEAD_KINDS = ("param", "tool", "system")
"""The kinds of a request's head: everything before its history (names the lineage)."""


@dataclass(frozen=True, slots=True)
class SegmentSpec:
    """Input to :func:`build_segments`: one segment before offsets and digests are assigned.

    Attributes:
        kind: ``param``, ``tool``, ``system``, ``message`` or ``tail``.
        name: Human name, e.g. ``tool:get_weather``, ``system[0]``, ``messages[3].content[1]``.
        data: The segment's bytes (canonical or as-received JSON).
        path: JSON pointer of the segment in the provider body (``/messages/3/content/1``)
            or ``""``.
        breakpoint: Cache breakpoint TTL label on this segment (``"5m"``, ``"1h"``), or ``None``.
        label: Extra identity used for cause analysis (a tool's name, a message role), or ``""``.
    """

    kind: str
    name: str
    data: bytes
    path: str = ""
    breakpoint: str | None = None
    label: str = ""


@dataclass(frozen=True, slots=True)
class Segment:
    """One rendered segment with its byte range in the prompt data and its digests.

    Attributes:
        kind: ``param``, ``tool``, ``system``, ``message`` or ``tail``.
        name: Human name (see :class:`SegmentSpec`).
        start: Byte offset of the first byte in the prompt data (half-open range).
        end: Byte offset one past the last byte.
        digest: SHA-256 hex of this segment's bytes alone.
        prefix_digest: Chained SHA-256 hex of all segments up to and including this one.
        tokens: Token count of the segment's bytes, ``None`` when no tokenizer was used.
        path: JSON pointer in the provider body, or ``""``.
        breakpoint: Cache breakpoint TTL label, or ``None``.
        label: Extra identity (tool name, message role), or ``""``.
    """

    kind: str
    name: str
    start: int
    end: int
    digest: str
    prefix_digest: str
    tokens: int | None = None
    path: str = ""
    breakpoint: str | None = None
    label: str = ""

    @property
    def size_bytes(self) -> int:
        """Length of the segment in bytes."""
        return self.end - self.start


_KIND_TAGS = {kind: kind.encode() + b"\0" for kind in KINDS}
"""``kind || 0x00`` of each kind, as :func:`chain` hashes it (made once)."""


_SET_KIND, _SET_NAME, _SET_START, _SET_END, _SET_DIGEST, _SET_PREFIX, _SET_TOKENS, _SET_PATH, \
    _SET_BREAKPOINT, _SET_LABEL = (getattr(Segment, f).__set__ for f in (
        "kind", "name", "start", "end", "digest", "prefix_digest", "tokens", "path",
        "breakpoint", "label"))
_NEW = object.__new__


def new_segment(kind: str, name: str, start: int, end: int, digest: str, prefix_digest: str,
                tokens: int | None, path: str, breakpoint: str | None, label: str) -> Segment:
    """``Segment(kind, name, ..., label)`` (every field given, in order), made about twice as
    fast: the fields are set through their slot descriptors, where the frozen dataclass's
    ``__init__`` calls ``object.__setattr__`` per field. For the loops that make a segment
    per history item (:func:`build_segments`, :func:`rechain`); ``tests/test_segment.py``
    checks it against the constructor and the field list."""
    segment = _NEW(Segment)
    _SET_KIND(segment, kind)
    _SET_NAME(segment, name)
    _SET_START(segment, start)
    _SET_END(segment, end)
    _SET_DIGEST(segment, digest)
    _SET_PREFIX(segment, prefix_digest)
    _SET_TOKENS(segment, tokens)
    _SET_PATH(segment, path)
    _SET_BREAKPOINT(segment, breakpoint)
    _SET_LABEL(segment, label)
    return segment


_SPEC_KIND, _SPEC_NAME, _SPEC_DATA, _SPEC_PATH, _SPEC_BREAKPOINT, _SPEC_LABEL = (
    getattr(SegmentSpec, f).__set__ for f in ("kind", "name", "data", "path", "breakpoint",
                                              "label"))


def new_spec(kind: str, name: str, data: bytes, path: str, breakpoint: str | None,
             label: str) -> SegmentSpec:
    """``SegmentSpec(kind, name, data, path, breakpoint, label)``, made as
    :func:`new_segment` makes a segment (for the segmenter's per-block loop)."""
    spec = _NEW(SegmentSpec)
    _SPEC_KIND(spec, kind)
    _SPEC_NAME(spec, name)
    _SPEC_DATA(spec, data)
    _SPEC_PATH(spec, path)
    _SPEC_BREAKPOINT(spec, breakpoint)
    _SPEC_LABEL(spec, label)
    return spec


def chain(previous: bytes | None, kind: str, data: bytes) -> bytes:
    """Return ``SHA-256(previous || kind || 0x00 || data)`` (raw 32 bytes).

    ``previous=None`` starts a new chain from the ``sp1`` root.
    """
    return _SHA256(b"".join((_ROOT if previous is None else previous,
                             _KIND_TAGS.get(kind) or kind.encode() + b"\0", data))).digest()


def chain_pieces(previous: bytes | None, kind: str, pieces: Iterable[bytes]) -> bytes:
    """:func:`chain` of ``b"".join(pieces)``: for a segment the renderer holds in parts, such
    as a content block and its role wrapper (joined with the chain's prefix for one SHA-256
    call: the copy costs less than an ``update`` call per piece)."""
    return _SHA256(b"".join((_ROOT if previous is None else previous,
                             _KIND_TAGS.get(kind) or kind.encode() + b"\0", *pieces))).digest()


def rechain(segments: Iterable[Segment], data: bytes, *, base: int, shift: int,
            previous: bytes | None) -> tuple[list[Segment], bytes | None]:
    """``segments`` moved ``shift`` bytes and chained from ``previous`` (another prefix
    before them): same kind, name, bytes, standalone digest, tokens, path, breakpoint and
    label; new offsets and prefix digests, one SHA-256 each. ``data[s.start - base:s.end -
    base]`` are segment ``s``'s bytes.

    Returns:
        ``(segments, last_raw_digest)`` (``previous`` when there are none).
    """
    out: list[Segment] = []
    append, make, sha256, tags = out.append, new_segment, hashlib.sha256, _KIND_TAGS
    digest = previous
    join, view = b"".join, memoryview(data)  # one copy of a segment's bytes: the join's
    for s in segments:  # chain() inlined: one history segment per turn passes here
        start, end, kind = s.start, s.end, s.kind
        digest = sha256(join((_ROOT if digest is None else digest,
                              tags.get(kind) or kind.encode() + b"\0",
                              view[start - base:end - base]))).digest()
        append(make(kind, s.name, start + shift, end + shift, s.digest, digest.hex(),
                    s.tokens, s.path, s.breakpoint, s.label))
    return out, digest


def tag(raw_digest: bytes) -> str:
    """Format a raw chained digest as a fingerprint string ``sp2:<hex>``."""
    return f"{FINGERPRINT_TAG}:{raw_digest.hex()}"


def build_segments(
    specs: Iterable[SegmentSpec],
    *,
    start: int = 0,
    previous: bytes | None = None,
    token_counts: Sequence[int | None] | None = None,
) -> tuple[tuple[Segment, ...], bytes, bytes | None]:
    """Assign byte ranges and chained digests to ``specs``.

    Args:
        specs: Segments in prompt order.
        start: Byte offset of the first segment (to continue an existing prompt).
        previous: Raw chained digest to continue from (``None`` = new chain).
        token_counts: Optional token count per spec, same length as ``specs``.

    Returns:
        ``(segments, data, last_raw_digest)`` where ``data`` is the concatenated bytes and
        ``last_raw_digest`` is the raw chained digest after the last segment (``previous`` when
        ``specs`` is empty).
    """
    out: list[Segment] = []
    parts: list[bytes] = []
    offset = start
    digest = previous
    sha256 = hashlib.sha256
    for index, spec in enumerate(specs):
        data = spec.data
        digest = chain(digest, spec.kind, data)
        end = offset + len(data)
        out.append(new_segment(
            spec.kind, spec.name, offset, end, sha256(data).hexdigest(), digest.hex(),
            None if token_counts is None else token_counts[index], spec.path, spec.breakpoint,
            spec.label))
        parts.append(data)
        offset = end
    return tuple(out), b"".join(parts), digest


def fingerprint_of(segments: Sequence[Segment]) -> str:
    """Fingerprint (``sp2:<hex>``) of a segment sequence: its last chained digest.

    The empty sequence has the root fingerprint.
    """
    if not segments:
        return tag(_ROOT)
    return f"{FINGERPRINT_TAG}:{segments[-1].prefix_digest}"


def sum_tokens(segments: Iterable[Segment]) -> int | None:
    """Total tokens of ``segments``; ``None`` when any count is unknown (no tokenizer)."""
    total = 0
    for segment in segments:
        if segment.tokens is None:
            return None
        total += segment.tokens
    return total


public(Segment)


class ByteSlices(Protocol):
    """Read-only bytes addressed by slices: ``bytes`` or :class:`SegmentBytes`."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice, /) -> bytes: ...

    def find(self, needle: bytes, start: int = 0, end: int | None = None, /) -> int: ...


class SegmentBytes:
    """Immutable bytes held as pieces that requests share: what a request repeats of its
    predecessor's segment data is the predecessor's pieces, not a copy (``data[s.start:s.end]``
    of a segment is one slice of one piece, as segment ends are piece ends).

    Pieces are merged as they are appended so that each is at least twice the size of the
    one after it (a binary counter): at most ``log2(len / smallest piece) + 1`` pieces, and
    appending ``n`` bytes copies ``O(n log len)`` bytes amortized, never the whole.

    Slicing (``[start:end]``, step 1) returns ``bytes``; ``bytes(x)`` joins the pieces once.
    """

    __slots__ = ("_joined", "_length", "_pieces", "_starts")

    def __init__(self, pieces: Iterable[bytes] = ()) -> None:
        kept = tuple(p for p in pieces if p)
        starts, offset = [], 0
        for piece in kept:
            starts.append(offset)
            offset += len(piece)
        self._pieces: tuple[bytes, ...] = kept
        self._starts: tuple[int, ...] = tuple(starts)
        self._length = offset
        self._joined: bytes | None = kept[0] if len(kept) == 1 else None

    def __len__(self) -> int:
        return self._length

    def __bytes__(self) -> bytes:
        if self._joined is None:
            self._joined = b"".join(self._pieces) if self._pieces else b""
        return self._joined

    def __repr__(self) -> str:
        return f"SegmentBytes({self._length} bytes in {len(self._pieces)} pieces)"

    def __getitem__(self, key: slice) -> bytes:
        start, stop, step = key.indices(self._length)
        if step != 1:
            return bytes(self)[key]
        if start >= stop:
            return b""
        if self._joined is not None:
            return self._joined[start:stop]
        first = bisect.bisect_right(self._starts, start) - 1
        begin = self._starts[first]
        piece = self._pieces[first]
        if stop <= begin + len(piece):
            return piece[start - begin:stop - begin]
        last = bisect.bisect_right(self._starts, stop - 1) - 1
        parts = [piece[start - begin:], *self._pieces[first + 1:last]]
        parts.append(self._pieces[last][:stop - self._starts[last]])
        return b"".join(parts)

    def find(self, needle: bytes, start: int = 0, end: int | None = None) -> int:
        """As ``bytes.find``: the lowest index of ``needle`` in ``[start, end)``, or -1."""
        stop = self._length if end is None else min(end, self._length)
        if self._joined is not None or len(self._pieces) < 2:
            return bytes(self).find(needle, start, stop)
        # Within one piece, or straddling a boundary: search a window with len(needle) - 1
        # bytes of overlap (pieces are searched in place, never joined).
        overlap = max(len(needle) - 1, 0)
        for index, piece in enumerate(self._pieces):
            begin = self._starts[index]
            if begin + len(piece) <= start:
                continue
            if begin >= stop:
                break
            lo, hi = max(start - begin, 0), min(stop - begin, len(piece))
            found = piece.find(needle, lo, hi)
            if found >= 0:
                return begin + found
            end_at = begin + hi
            if overlap and end_at < stop:
                window = self[max(end_at - overlap, start):min(end_at + overlap, stop)]
                found = window.find(needle)
                if found >= 0:
                    return max(end_at - overlap, start) + found
        return -1

    def __contains__(self, needle: bytes) -> bool:
        return self.find(needle) >= 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SegmentBytes):
            return self._length == other._length and (
                self._pieces == other._pieces or bytes(self) == bytes(other))
        if isinstance(other, bytes):
            return self._length == len(other) and bytes(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(bytes(self))

    def __reduce__(self) -> tuple[type[SegmentBytes], tuple[tuple[bytes, ...]]]:
        return (SegmentBytes, (self._pieces,))

    def span(self, start: int, end: int) -> SegmentBytes:
        """The bytes ``[start, end)`` sharing the pieces inside the range (the pieces cut at
        either end are sliced)."""
        end = min(end, self._length)
        if start <= 0 and end >= self._length:
            return self
        if start >= end:
            return SegmentBytes()
        first = bisect.bisect_right(self._starts, start) - 1
        last = bisect.bisect_right(self._starts, end - 1) - 1
        if first == last:
            begin = self._starts[first]
            return SegmentBytes((self._pieces[first][start - begin:end - begin],))
        head = self._pieces[first][start - self._starts[first]:]
        tail = self._pieces[last][:end - self._starts[last]]
        return SegmentBytes((head, *self._pieces[first + 1:last], tail))

    def pieces(self) -> tuple[bytes, ...]:
        """The pieces, in order (their concatenation is these bytes)."""
        return self._pieces

    @classmethod
    def joined(cls, parts: Iterable[SegmentBytes | bytes]) -> SegmentBytes:
        """``parts`` one after the other, pieces shared, then merged so each piece is at least
        twice the next one (see the class docstring)."""
        pieces: list[bytes] = []
        for part in parts:
            for piece in (part.pieces() if isinstance(part, SegmentBytes) else (part,)):
                if not piece:
                    continue
                while pieces and len(pieces[-1]) < 2 * len(piece):
                    piece = pieces.pop() + piece
                pieces.append(piece)
        return cls(pieces)


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

    Compares equal to any sequence (not a str) with the same items, e.g. a tuple, and hashes,
    concatenates with tuples and takes indices as that tuple would. Reading an item of the
    first part is the fast path (one check, no loop over the parts).
    """

    __slots__ = ("_first", "_first_len", "_len", "_parts")

    def __init__(self, *parts: tuple[Sequence[_T], int]) -> None:
        total, kept = 0, parts
        for _, n in parts:  # a loop: made several times per recorded request
            if not n:
                kept = tuple([part for part in parts if part[1]])
            total += n
        self._parts, self._len = kept, total
        self._first: Sequence[_T] = kept[0][0] if kept else ()
        self._first_len = kept[0][1] if kept else 0

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: SupportsIndex) -> _T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[_T, ...]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> _T | tuple[_T, ...]:
        if type(index) is int:  # the hot path: binary searches read single items
            if 0 <= index < self._first_len:
                return self._first[index]
            if index < 0:
                index += self._len
        elif isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            if step != 1:
                return tuple(self.as_list())[index]
            out: list[_T] = []
            offset = 0
            for seq, n in self._parts:
                lo, hi = max(start - offset, 0), min(stop - offset, n)
                if lo < hi:
                    out.extend(seq[lo:hi])
                offset += n
            return tuple(out)
        else:  # an int subclass (bool) or an integer-like index (numpy's), as a tuple takes
            try:
                index = operator.index(index)
            except TypeError:
                raise TypeError(f"indices must be integers or slices, not "
                                f"{type(index).__name__}") from None
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

    def __hash__(self) -> int:
        return hash(tuple(self.as_list()))  # equal to the tuple of its items: hashed as one

    def __add__(self, other: object) -> tuple[_T, ...]:
        if isinstance(other, (tuple, Snapshot)):  # as a tuple concatenates
            return (*self.as_list(), *other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[_T, ...]:
        if isinstance(other, tuple):
            return (*other, *self.as_list())
        return NotImplemented

    def __repr__(self) -> str:
        return f"Snapshot({tuple(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self.as_list()),))

    def shared_prefix(self, other: object) -> int:
        """How many leading items this snapshot and ``other`` hold as the same objects, known
        without reading any: those of the first list both read (two requests of one
        conversation), ``0`` when ``other`` is no snapshot or reads another list."""
        if type(other) is Snapshot and other._first is self._first:
            return min(self._first_len, other._first_len)
        return 0

    def first_part(self) -> tuple[Sequence[_T], int]:
        """``(sequence, length)``: the first part, whose items a caller reading many of them
        (a binary search) indexes directly, without this class's ``__getitem__``."""
        return self._first, self._first_len

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
            more: list[_T] = []
            for seq, k in parts[1:]:
                more.extend(seq[:k])
            with _EXTENDING:
                # zip stops at the shorter: the items the list already has past ``n``
                if all(a is b for a, b in zip(itertools.islice(first, n, n + len(more)), more,
                                              strict=False)):
                    first.extend(more[len(first) - n:])
                    shared = first
        if shared is None:
            shared = _Shared(self.as_list())
        return Snapshot((shared, self._len), (tail, len(tail)))

    def as_list(self) -> list[_T]:
        """The items as a new list, one slice of each part (a few times faster than
        iterating the snapshot, which reads item by item to stay within each part)."""
        out: list[_T] = []
        for seq, n in self._parts:
            out.extend(seq[:n])
        return out


class HeadedSegments(Sequence[Segment]):
    """A request's segments as its head and its history, the history held once per
    conversation: what lint keeps per request (``_lint._requests``), so that a request whose
    head changed (a clock in the system prompt) costs what is new in it, not its history.

    Args:
        head: The leading run of segments of a kind in :data:`HEAD_KINDS` (the head, and any
            leading system items of the history), as :func:`build_segments` makes them.
        history: The segments after them, with offsets relative to the history's start
            (the first at ``0``) and, as ``prefix_digest``, the chain of the history alone
            (:func:`chain` from the root, as ``build_segments(specs)`` of the history's specs
            makes it): the same under every head, so the requests of a conversation share
            them (a :class:`Snapshot` over the conversation's list).

    Reading: ``view[i]`` of a head segment is that segment; of a history segment, a new
    :class:`Segment` moved after the head (offsets into the request's segment data) whose
    ``prefix_digest`` is :attr:`key` ``+ ":" +`` its history chain. Two views' segments at an
    index have equal ``prefix_digest`` exactly when the requests' chained digests there are
    equal (the same head run, hence the same :attr:`key`, and the same history after it),
    so code comparing prefixes by ``prefix_digest`` works on views unchanged; the strings
    never equal a chained digest's hex, so views are only compared with views (never write
    them to a ledger: :meth:`keys_from` and :attr:`history` are for comparisons). Slices
    give tuples of such segments.
    """

    __slots__ = ("_len", "head", "heads", "history", "key", "shift")

    def __init__(self, head: tuple[Segment, ...], history: Sequence[Segment]) -> None:
        self.head = head
        self.heads = len(head)
        self.history = history
        self.key = head[-1].prefix_digest if head else ""
        self.shift = head[-1].end if head else 0
        self._len = len(head) + len(history)

    @classmethod
    def of(cls, segments: Sequence[Segment], data: bytes) -> HeadedSegments:
        """The view of ``segments`` (``data[s.start:s.end]`` their bytes), split after
        their leading run of head kinds: the history's chain made from its own start, one
        SHA-256 per history segment (and per head segment when ``segments`` is a view whose
        history starts with head kinds, such as leading system items: their chained digests
        are made)."""
        heads = 0
        for s in segments:
            if s.kind not in HEAD_KINDS:
                break
            heads += 1
        head = tuple(segments[:heads])
        if type(segments) is HeadedSegments and heads > segments.heads:
            head = tuple(rechain(head, data, base=0, shift=0, previous=None)[0])
        base = head[-1].end if head else 0
        history, _ = rechain(segments[heads:], data, base=0, shift=-base, previous=None)
        return cls(head, history)

    @property
    def split(self) -> bool:
        """Whether the history starts with a segment of no head kind (or is empty): this
        view is split where :meth:`of` splits (what lint compares views by)."""
        history = self.history
        return not history or history[0].kind not in HEAD_KINDS

    def __len__(self) -> int:
        return self._len

    def _moved(self, s: Segment) -> Segment:
        shift = self.shift
        return new_segment(s.kind, s.name, s.start + shift, s.end + shift, s.digest,
                           f"{self.key}:{s.prefix_digest}", s.tokens, s.path, s.breakpoint,
                           s.label)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Segment: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Segment, ...]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Segment | tuple[Segment, ...]:
        if type(index) is int and 0 <= index < self.heads:  # the hot path: a head segment
            return self.head[index]
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            heads = self.heads
            if step != 1 or start >= stop:
                return tuple(self[i] for i in range(start, stop, step))
            return (*self.head[start:min(stop, heads)],
                    *map(self._moved, self.history[max(start - heads, 0):max(stop - heads, 0)]))
        i = operator.index(index)
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("HeadedSegments index out of range")
        heads = self.heads
        return self.head[i] if i < heads else self._moved(self.history[i - heads])

    def __iter__(self) -> Iterator[Segment]:
        # in C over the head (what most loops read before they stop), each history
        # segment made when reached
        return itertools.chain(self.head, map(self._moved, self.history))

    def __reversed__(self) -> Iterator[Segment]:
        return itertools.chain(map(self._moved, reversed(self.history)), reversed(self.head))

    def __repr__(self) -> str:
        return f"HeadedSegments({self.heads} head + {len(self.history)} history segments)"

    def keys_from(self, start: int) -> Sequence[Segment]:
        """Segments whose kind, name, standalone digest, path, breakpoint and label are
        those of ``self[start:]`` (offsets and ``prefix_digest`` not: a history segment as
        held), made for none of the history's segments (a copy of the references only)."""
        heads = self.heads
        if start >= heads:
            return self.history[start - heads:]
        return (*self.head[start:], *self.history)
