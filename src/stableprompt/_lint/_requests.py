"""A capture request as the linter keeps it, and the digest indexes that find its predecessor.

Used by :mod:`stableprompt._lint._linter` (the pairing rules are in its docstring).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._diff import item_of
from .._segment import HEAD_KINDS, HeadedSegments, Segment, SegmentBytes
from .._wire._formats import HISTORY_KEYS, session_hint
from .._wire._resegment import breakpoint_indices
from .._wire._segmenter import SegmentedRequest
from ._capture import CaptureEntry

__all__ = ["Req", "RequestIndex", "continues", "has_assistant", "head_count", "make_req", "ratio",
           "session_of"]


@dataclass(slots=True, eq=False)
class Req:
    """A segmented request, body dropped (memory stays ~ the segment data).

    ``scope``: the id that restricts predecessor candidates (session, ``metadata.user_id`` or
    ``prompt_cache_key``: different routing keys never share a cache). ``session``: the same id
    when it names one conversation (see :func:`session_of`), else ``None``.
    """

    pos: int
    index: int
    source: str
    wire_format: str
    group: str | None  # the capture file in a directory (conversations never cross files)
    scope: str | None
    session: str | None
    hinted: bool  # session taken from the body (a hint), not from the capture record
    model: str | None
    segments: Sequence[Segment]  # a tuple, or a HeadedSegments view (make_req)
    data: SegmentBytes
    has_assistant: bool
    breakpoints: tuple[Segment, ...]
    first_message_digest: str | None
    first_breakpoint: int = -1  # the index of breakpoints[0] in segments (-1: none)


@dataclass(slots=True, eq=False)
class _Run:
    """Consecutive chained prefix digests of the index (``digests``, the first at segment
    index ``start``) held by exactly the same requests (``holders``, positions in the order
    added): an edge of the radix tree of the requests' chains. ``parent``: the run ending
    just before ``start`` (every holder of this run holds it too)."""

    digests: list[str]
    holders: list[int]
    parent: _Run | None
    start: int


@dataclass(slots=True, eq=False)
class _Tail:
    """The history of the one request (``holders``) the index holds under a head
    (:class:`~stableprompt._segment.HeadedSegments`' ``key``), its digests not entered in
    :attr:`RequestIndex.runs` until a second request under that head is added: a request
    with a head no other has (a clock in its system prompt) costs the index its head's new
    digests, not its history's. ``parent``: the run holding the head's last digest."""

    segments: HeadedSegments
    holders: list[int]
    parent: _Run | None


def _held(segments: Sequence[Segment], start: int = 0) -> Sequence[Segment]:
    """``segments[start:]`` for reading kinds, standalone digests and sizes only (of a view:
    its history segments as held, none made)."""
    if type(segments) is HeadedSegments:
        return segments.keys_from(start)
    return segments[start:] if start else segments


def _digest(segments: Sequence[Segment], i: int) -> str:
    """``segments[i].prefix_digest``, of a view's history segment made without the segment."""
    if type(segments) is HeadedSegments and i >= segments.heads:
        return f"{segments.key}:{segments.history[i - segments.heads].prefix_digest}"
    return segments[i].prefix_digest


@dataclass(slots=True)
class RequestIndex:
    """Digest indexes of the requests added so far, positions in the order added.

    :meth:`holders`: chained prefix digest -> requests holding it, kept per run of digests
    that the same requests hold (:class:`_Run`): a request re-sending its conversation
    joins one run per earlier request it extends, not one list per segment, and its new
    segments make one run; the history of a request whose head no other request has yet
    is kept as it is (:class:`_Tail`) until one does. ``by_last``: the last request ending
    in that prefix digest; ``by_first``: opening message digest -> requests;
    :attr:`by_segment`: standalone segment digest -> requests (each once), built on first
    use from the requests added until then (few requests need it: pairing by shared bytes
    anywhere is the rare path, and it costs a lookup per segment of every request).
    """

    runs: dict[str, _Run] = field(default_factory=dict)
    by_last: dict[str, int] = field(default_factory=dict)
    by_first: dict[str, list[int]] = field(default_factory=dict)
    all: list[int] = field(default_factory=list)
    tails: dict[str, _Tail] = field(default_factory=dict)
    _by_segment: dict[str, list[int]] = field(default_factory=dict)
    _unsegmented: list[Req] = field(default_factory=list)  # added, not yet in _by_segment

    def holders(self, digest: str) -> list[int]:
        """Positions of the requests holding chained prefix digest ``digest``, in the order
        added (``KeyError`` when none does). Do not modify."""
        run = self.runs.get(digest)
        if run is not None:
            return run.holders
        key, _, local = digest.rpartition(":")
        tail = self.tails.get(key) if key else None
        if tail is not None and local in {s.prefix_digest for s in tail.segments.history}:
            return tail.holders
        raise KeyError(digest)

    def _holds(self, segments: Sequence[Segment], i: int) -> bool:
        """Whether an added request holds ``segments[i]``'s chained prefix digest."""
        if _digest(segments, i) in self.runs:
            return True
        if type(segments) is not HeadedSegments or i < segments.heads:
            return False
        tail = self.tails.get(segments.key)
        at = i - segments.heads
        return tail is not None and at < len(tail.segments.history) and \
            tail.segments.history[at].prefix_digest == segments.history[at].prefix_digest

    def shared(self, segments: Sequence[Segment]) -> int:
        """How many leading ``segments`` some added request holds too (by chained prefix
        digest). Holding is monotone along a chain (a request holding segment ``i``'s prefix
        digest holds every shorter prefix), so this is a binary search: O(log n) lookups."""
        lo, hi = 0, len(segments)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._holds(segments, mid - 1):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def add(self, req: Req) -> None:
        segments, pos, runs = req.segments, req.pos, self.runs
        headed = segments if type(segments) is HeadedSegments else None
        if headed is not None:
            tail = self.tails.pop(headed.key, None)
            if tail is not None:  # a second request under that head: its history entered
                held = tail.segments
                run = _Run([f"{held.key}:{s.prefix_digest}" for s in held.history],
                           tail.holders, tail.parent, held.heads)
                runs.update(dict.fromkeys(run.digests, run))
        known = self.shared(segments)
        parent = None
        if known:
            run = runs[_digest(segments, known - 1)]
            cut = known - run.start  # the run's digests this request holds
            if cut < len(run.digests):  # it leaves the run inside: split off the part held
                lower = _Run(run.digests[:cut], run.holders.copy(), run.parent, run.start)
                for digest in lower.digests:
                    runs[digest] = lower
                del run.digests[:cut]
                run.start, run.parent = known, lower
                run = lower
            parent = run
            held_run: _Run | None = run
            while held_run is not None:  # the request holds this run and every one before it
                held_run.holders.append(pos)
                held_run = held_run.parent
        end = len(segments)
        if headed is not None and known < headed.heads < end:
            end = headed.heads  # a new head: its history kept as it is (_Tail)
        if known < end:
            fresh = _Run([_digest(segments, i) for i in range(known, end)], [pos], parent,
                         known)
            runs.update(dict.fromkeys(fresh.digests, fresh))  # in C: a whole new history
            # after a changed head is a fresh run (every chained digest moved)
            parent = fresh
        if end < len(segments):
            assert headed is not None
            self.tails[headed.key] = _Tail(headed, [pos], parent)
        if segments:
            self.by_last[_digest(segments, len(segments) - 1)] = pos
        if req.first_message_digest is not None:
            self.by_first.setdefault(req.first_message_digest, []).append(pos)
        self.all.append(pos)
        self._unsegmented.append(req)

    @property
    def by_segment(self) -> dict[str, list[int]]:
        """Standalone segment digest -> positions of the requests holding it, in order."""
        by_segment = self._by_segment
        get = by_segment.get
        for req in self._unsegmented:
            pos = req.pos
            for seg in _held(req.segments):
                positions = get(seg.digest)
                if positions is None:
                    by_segment[seg.digest] = [pos]
                elif positions[-1] != pos:
                    positions.append(pos)
        self._unsegmented.clear()
        return by_segment


def has_assistant(wire_format: str, body: Mapping[str, Any]) -> bool:
    items = body.get(HISTORY_KEYS[wire_format])
    if not isinstance(items, list):
        return False
    for item in items:
        if not isinstance(item, Mapping):
            continue
        role, kind = item.get("role"), item.get("type")
        if role == "assistant" or (role == "tool" and wire_format == "openai-chat"):
            return True
        if isinstance(kind, str) and (kind.endswith(("_call", "_call_output"))
                                      or kind in ("reasoning", "item_reference", "compaction")):
            return True
    return False


def session_of(entry_session: str | None, body: Mapping[str, Any]) -> tuple[
        str | None, str | None, bool]:
    """``(scope, session, hinted)`` of a request.

    The capture record's ``session`` names a conversation. A body's ``metadata.user_id`` or
    ``prompt_cache_key`` is only a hint (``hinted``): many harnesses use one per user or per
    head, and it stops counting as a session when conversations interleave under it
    (:meth:`._linter._Linter._interleaved`). A ``prompt_cache_key`` starting with ``sp-`` is the one
    stableprompt derives from the head fingerprint (``prompt_cache_key=True``): it names a
    lineage, never a conversation, so it only scopes candidates.
    """
    if entry_session is not None:
        return entry_session, entry_session, False
    hint = session_hint(body)
    if hint is None:
        return None, None, False
    value, names_conversation = hint
    return value, (value if names_conversation else None), True


def opening_digest(segments: Sequence[Segment]) -> str | None:
    """The digest naming a request's opening message: its first message segment's, combined
    with the fields beside ``role``/``content`` of that history item (a Responses item's
    ``.rest`` segment: its ``id``), so sessions that send the same text under their own item
    ids open differently, while a retry or resume re-sending the same items opens alike;
    ``None`` without a message."""
    at = next((i for i, s in enumerate(segments) if s.kind == "message"), None)
    if at is None:
        return None
    first = segments[at]
    item = item_of(first.path)
    rest = None
    for i in range(at + 1, len(segments)):  # by index: the item's blocks only are read
        s = segments[i]
        if s.kind != "message" or item_of(s.path) != item:
            break
        if s.name.endswith(".rest"):
            rest = s
            break
    if rest is None:
        return first.digest
    return hashlib.sha256(f"{first.digest}:{rest.digest}".encode()).hexdigest()


def make_req(pos: int, entry: CaptureEntry, seg: SegmentedRequest, group: bool,
             headed: bool = False) -> Req:
    """The request lint keeps of a segmented one. ``headed``: its segments as a
    :class:`~stableprompt._segment.HeadedSegments` view (as ``_resegment`` makes them for
    lint, else made here: one SHA-256 per history segment); every request of one linter
    must be kept alike (a view's prefix digests compare with views only)."""
    # Without a view, a tuple, also of a request segmented from its conversation's previous
    # one (a Snapshot over a list they share): lint's binary searches index segments often,
    # a tuple at C speed. A view shares its history with its conversation's requests.
    segments: Sequence[Segment]
    if not headed:
        segments = tuple(seg.segments)
    elif type(seg.segments) is HeadedSegments and seg.segments.split:
        segments = seg.segments
    else:
        segments = HeadedSegments.of(seg.segments, bytes(seg.segment_bytes))
    first = opening_digest(segments)
    scope, session, hinted = session_of(entry.session, entry.body)
    marks = breakpoint_indices(seg)
    return Req(
        pos=pos, index=entry.index, source=entry.source, wire_format=seg.wire_format,
        group=entry.group if group else None,
        scope=scope, session=session, hinted=hinted, model=seg.model, segments=segments,
        data=seg.segment_bytes, has_assistant=has_assistant(seg.wire_format, entry.body),
        # reused segments' positions come from the conversation's previous request
        breakpoints=tuple(segments[i] for i in marks),
        first_breakpoint=marks[0] if marks else -1,
        first_message_digest=first,
    )


def continues(a: Req, b: Req, start: int = 0) -> bool:
    """Whether ``b`` re-sends (same bytes, by digest, anywhere) at least a quarter of the bytes
    of ``a``'s message blocks from segment ``start`` on: evidence that ``b`` continues ``a``'s
    conversation. Stock phrases two conversations share ("Let me check.") stay far below."""
    sizes: dict[str, int] = {}
    total = 0
    for s in _held(a.segments, start):
        if s.kind == "message":
            sizes[s.digest] = s.size_bytes
            total += s.size_bytes
    if not total:
        return False
    shared = sum(sizes.pop(s.digest, 0) for s in _held(b.segments) if s.kind == "message")
    return 4 * shared >= total


def head_count(req: Req) -> int:
    """How many leading segments of ``req`` are head segments (params, tools, system)."""
    if type(req.segments) is HeadedSegments:
        return req.segments.heads
    n = 0
    for s in req.segments:
        if s.kind not in HEAD_KINDS:
            break
        n += 1
    return n


def ratio(part: int, whole: int) -> float:
    return part / whole if whole else 1.0
