"""Segments and chained prefix fingerprints.

A prompt is an ordered list of segments (a tool, a system block, a message or content block,
a tail slot, a cache-key parameter). Each segment's digest is chained with its predecessor's::

    d_0 = SHA-256("sp1")
    d_i = SHA-256(d_{i-1} || kind || 0x00 || bytes_i)

so ``prefix_digest`` of segment *i* names the whole prefix up to and including *i*, and two
prompts share a cacheable prefix exactly as far as their chains agree. Fingerprints are the hex
digest tagged with the algorithm version: ``sp1:<64 hex>``. Changing this algorithm requires a
new tag.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ._public import public

__all__ = [
    "FINGERPRINT_TAG",
    "HEAD_KINDS",
    "ByteSlices",
    "Segment",
    "SegmentBytes",
    "SegmentSpec",
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

FINGERPRINT_TAG = "sp1"
_ROOT = hashlib.sha256(FINGERPRINT_TAG.encode()).digest()
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
    """Format a raw chained digest as a fingerprint string ``sp1:<hex>``."""
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
    """Fingerprint (``sp1:<hex>``) of a segment sequence: its last chained digest.

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
