"""Segment a request body reusing the segments of the lineage's previous request.

An agent loop sends the same history again with a few items appended, so the recorder (per
call) and lint (per capture) keep, per cache lineage, the last segmented request and where
each history item's bytes end in the compact dump of its history. A new request of the
lineage is segmented as follows:

1. the head (cache-key params, tools, system) is the one of a recent request whose fields
   outside the history have the same bytes (one dump of those fields and a lookup), else it
   is segmented as usual (a few dozen segments);
2. when its segments equal the stored request's, the history is dumped once
   (:func:`~stableprompt._canonical.decoded_json`: one C call) and compared byte for byte
   with the stored dump: every stored item whose bytes lie inside the common byte prefix is
   the same JSON value with the same serialization at the same index, so its segments (bytes,
   offsets, digests, chained prefix digests, names, breakpoints) are the stored ones;
3. only the items after that are segmented, hashed and chained, continuing from the last
   reused prefix digest.

A request whose head changed (a clock in the system prompt, a tool added) but whose history
opens like a stored conversation's on another head keeps that conversation's history
segments too (bytes, names, standalone digests, breakpoints): they are only moved to their
new offsets and chained again from the new head (one SHA-256 per segment, no dump).

The result equals :func:`~stableprompt._wire._formats.segment_request` of the same body,
segment for segment (``tests/test_resegment.py`` checks it on random conversations). Bodies
this does not cover go the slow way: a history that is not a list, an Anthropic body with a
top-level ``cache_control`` (its automatic breakpoint marks the last block, wherever the
history ends). Cost of a request sharing its history: one dump and one byte comparison of
the history (C), plus Python work for the new items only.

A body whose bytes stableprompt rendered is segmented from them
(:meth:`LineageSegments.segment_rendered`): the bytes around its history and its shared items
are compared, only the new items are decoded. Lint does the same for a capture line
(:meth:`LineageSegments.segment_captured`) once the earlier line it continues is known to be
exactly its body's compact dump, naming its history key once.

For lint (``local_history``), a request's segments are a
:class:`~stableprompt._segment.HeadedSegments` view: its head, then history segments made
once per conversation with offsets from the history's start and no chained digest of their
own, so a request whose head changed keeps them as they are (nothing moved, nothing
rechained). A capture line whose fields outside its history changed (a clock in the system
prompt, before the history or after it, as Claude Code writes it) is read from its
conversation's stored line (:meth:`LineageSegments.segment_reheaded`): the members the two
lines share from their start, and after the history from its end and from the line's end,
are the stored body's values, the other members and the new items are decoded, and a head
value that is the same object as one seen before keeps its segment spec.

The recorder also keeps each stored request's token counts here
(:meth:`LineageSegments.remember_tokens`), so the reused segments are not counted again.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._canonical import decoded_json, loads
from .._exceptions import CaptureError
from .._segment import (
    HEAD_KINDS,
    HeadedSegments,
    Segment,
    SegmentBytes,
    SegmentSpec,
    Snapshot,
    build_segments,
    rechain,
)
from ._formats import SegmentSteps, segment_request, segment_steps
from ._segmenter import SegmentBuilder, SegmentedRequest

__all__ = ["LineageSegments", "Resegmented", "breakpoint_indices", "common_prefix_bytes"]

_CHUNK = 1 << 16
_DUMPS = 1 << 13
"""Dumps of head values lint keeps by identity (``LineageSegments._dumps``), at most."""


def common_prefix_bytes(a: bytes, b: bytes | memoryview, *, offset: int = 0) -> int:
    """Length of the longest common prefix of ``a[offset:]`` and ``b`` (C comparisons of
    64 KiB pieces in place, ``bytes.startswith`` of a view: nothing copied, then a binary
    search inside the first differing one)."""
    limit = min(len(a) - offset, len(b))
    view = memoryview(b)
    start = 0
    while start < limit:
        end = min(start + _CHUNK, limit)
        if not a.startswith(view[start:end], offset + start):
            low, high = start, end  # the answer is in [low, high)
            while high - low > 1:
                mid = (low + high) // 2
                if a.startswith(view[low:mid], offset + low):
                    low = mid
                else:
                    high = mid
            return low
        start = end
    return max(limit, 0)


_Head = tuple[tuple[Segment, ...], bytes, bytes | None, dict[str, Any]]
"""A head: its segments, their data, the chain state after them, and the body's fields
outside the history."""


@dataclass
class _Stored:
    """The last request of a lineage, as the next one needs it."""

    segmented: SegmentedRequest
    head: int  # segments before the history
    dump: bytes | memoryview  # decoded_json of the history list (a view of a rendered body)
    # per item: offset in ``dump`` one past its last byte; segments of the request through
    # it (head included). Arrays: one per request made, and the garbage collector traverses
    # an array in one step, a list of ints item by item in every collection it survives.
    item_ends: array[int]
    item_segments: array[int]
    leading: int  # how many items from the first returned ``leading=True``
    # the history items of ``segmented.body``: its list (parsed) or, rebuilt, the read-only
    # sequence its body view holds (:meth:`SegmentedRequest._rebuilt`), over a list shared
    # with the lineage's other requests (``Snapshot.then``)
    items: Snapshot[Any]
    tokens: Sequence[int] | None = field(default=None)
    cumulative: Sequence[int] | None = field(default=None)  # running sums of ``tokens``
    # Rendered bodies only: the bytes around the history in the body, when the history is
    # exactly ``dump`` there (``None``: not known to be a compact rendered body).
    around: tuple[bytes, bytes] | None = field(default=None)
    # ``False``: ``around`` and ``dump`` are bytes of a capture, not yet known to be exactly
    # the body's compact dump naming its history once (checked on first reuse: _checked)
    checked: bool = field(default=True)
    # Lint: where each member of the line ends (the offset of the "," or "}" after it), each
    # known to be the compact dump of the body's field, the history's the "," or "}" after
    # its "]" (:func:`_members`); ``None``: not known yet
    members: list[tuple[str, int]] | None = field(default=None)


@dataclass(frozen=True, slots=True)
class _Base:
    """What a new request starts from before its first new item: ``done`` items' segments
    (head included) in ``kept``, whose data is ``prefix`` and whose chain ends in
    ``previous``; ``reused`` of them are the stored request's own (same offsets, digests,
    and the same list: :meth:`~stableprompt._segment.Snapshot.then`).

    For lint (:attr:`LineageSegments.local_history`): ``head`` holds the head's segments
    and ``kept`` the history's only, as :class:`~stableprompt._segment.HeadedSegments`
    holds them (offsets from the history's start, chained from the history's start:
    ``previous`` is that chain's state), and ``marks``, when known, the breakpoint indices
    of the segments ``head`` and ``kept`` hold."""

    reused: int
    kept: Snapshot[Segment]
    prefix: Sequence[SegmentBytes | bytes]
    previous: bytes | None
    item_ends: array[int]
    item_segments: array[int]
    leading_items: int
    heads: int
    head: tuple[Segment, ...] | None = None
    marks: list[int] | None = None


@dataclass(frozen=True, slots=True)
class Resegmented:
    """A segmented request and what it shares with the lineage's previous one.

    Attributes:
        segmented: Equal to ``segment_request(wire_format, body)``; its ``body`` is the
            decoded body (rebuilt from the stored request's items and the new ones when the
            body was not parsed, :meth:`LineageSegments.segment_rendered`: then made when
            first read, its fields read without making it by ``segmented._body_view``).
        reused: Leading segments taken from the previous request (``0``: none).
        previous_tokens: The previous request's token counts (one per segment, as the
            recorder counted them), when it stored them and ``reused > 0``.
        previous_cumulative: Their running sums, when stored with them.
    """

    segmented: SegmentedRequest
    reused: int = 0
    previous_tokens: Sequence[int] | None = None
    previous_cumulative: Sequence[int] | None = None


class LineageSegments:
    """Per-lineage memory of the last segmented request (bounded, thread-safe).

    Args:
        max_lineages: Conversations kept (lineage and opening bytes; least recently used
            dropped). Each holds one request's segments and the compact dump of its history
            (about the body's size).
        local_history: Segment requests as :class:`~stableprompt._segment.HeadedSegments`
            (lint): a conversation's history segments are made and chained once, whatever
            head comes before them, so a request whose head changed costs its new items,
            not its history. Such segments compare with each other only (no chained digest
            of a history segment is made): never for a recorder.
    """

    def __init__(self, max_lineages: int = 16, *, local_history: bool = False) -> None:
        self.max_lineages = max_lineages
        self.local_history = local_history
        self._stored: OrderedDict[tuple[str, str, int], _Stored] = OrderedDict()
        # rendered bodies: (format, bytes before the history) -> {opening bytes: stored key}
        self._rendered: dict[tuple[str, bytes], dict[bytes, tuple[str, str, int]]] = {}
        # (format, length, last bytes) of those "bytes before the history" -> the bytes
        # objects themselves: a body finds its own without copying and hashing its ~40 KB
        # head (a bytes object keeps its hash, so the one kept is hashed once)
        self._prefixes: dict[tuple[str, int, bytes], list[bytes]] = {}
        self._prefix_lengths: dict[str, dict[int, None]] = {}  # format -> their lengths
        # (format, opening hash) -> the stored key last seen with it, on whatever head
        self._openings: dict[tuple[str, int], tuple[str, str, int]] = {}
        self._opening_sizes: dict[str, dict[int, None]] = {}  # format -> their byte lengths
        # lint: format -> the dumps the last new head made (SegmentBuilder.known)
        self._dumps: dict[str, dict[int, tuple[Any, bytes | SegmentSpec]]] = {}
        # (format, the body's bytes outside its history) -> head segments, data, chain state,
        # and those fields' values (of the first body seen with them)
        self._heads: OrderedDict[tuple[str, bytes], _Head] = OrderedDict()
        # format -> the specs, segments and data of the last head segmented anew (the next
        # new head keeps the segments of the leading specs it shares)
        self._last_head: dict[str, tuple[list[SegmentSpec], tuple[Segment, ...], bytes]] = {}
        self._lock = threading.Lock()

    def segment(self, wire_format: str, body: Mapping[str, Any], *,
                content: bytes | None = None, checked: bool = True) -> Resegmented:
        """Segment ``body`` (decoded by :func:`~stableprompt._canonical.loads`), reusing the
        segments it shares with its lineage's previous request.

        ``content``: the body's bytes when stableprompt rendered them (compact JSON), so the
        next request of the conversation can be segmented without parsing it
        (:meth:`segment_rendered`); ``checked=False``: bytes from elsewhere, checked to be
        that before they are reused (:meth:`segment_captured`).

        Raises:
            CaptureError: as :func:`~stableprompt._wire._formats.segment_request`.
        """
        steps = segment_steps(wire_format)
        items = body.get(steps.history_key) if isinstance(body, Mapping) else None
        if not isinstance(items, list) or steps.marker_key in body:
            return Resegmented(segment_request(wire_format, body))
        try:
            head = self._head(steps, body)
            dump = decoded_json(items) if head[2] is not None else b""
        except TypeError:  # nested deeper than orjson writes (255 levels; loads reads 1,024):
            return Resegmented(segment_request(wire_format, body))  # says where, or ignores it
        if head[2] is None:  # no params, tools or system (a body without a model)
            return Resegmented(segment_request(wire_format, body))
        key = (steps.wire_format, head[2].hex(), hash(_opening(dump, items)))
        with self._lock:
            stored = self._stored.get(key)
            other_key = self._openings.get((key[0], key[2]))
            other = None if other_key in (None, key) else self._stored.get(other_key)
        done = 0  # history items reused
        if stored is not None and stored.segmented.segments[:stored.head] == head[0]:
            done = bisect.bisect_right(stored.item_ends,
                                       common_prefix_bytes(dump, stored.dump))
        local = self.local_history
        base = _reused(stored, done, local) if done and stored is not None else None
        if base is None and other is not None:  # the same history on another head?
            base = _rebased(other, dump, head, local)
            done = len(base.item_ends) if base is not None else 0
            stored = None  # nothing of ``other`` but its history segments carries over
        # The values shared with earlier requests are the ones kept (equal values, as equal
        # bytes): the fields outside the history of the first request with this head's bytes
        # and the stored history items, so a lineage holds its head and common history once,
        # not once per request.
        if done:
            shared = (stored if stored is not None else other)
            assert shared is not None
            items = [*itertools.islice(shared.items, done), *items[done:]]
        outside = head[3]
        body = {k: items if k == steps.history_key else outside[k] for k in body}
        around = None
        if content is not None:
            where = content.find(_needle(steps.history_key))
            at = where + len(_needle(steps.history_key)) - 1
            if where > 0 and content.startswith(dump, at):
                around = (content[:at], content[at + len(dump):])
        try:
            return self._finish(steps, key, body, Snapshot((items, len(items))), dump, done,
                                stored, base or _fresh(head, local), around, checked)
        except _Unplaced:  # a new item marks a segment made before it
            return Resegmented(segment_request(wire_format, body))

    def segment_captured(self, wire_format: str, body: Mapping[str, Any],
                         line: bytes) -> Resegmented:
        """:meth:`segment` of a body decoded from ``line``, bytes from a capture (not
        stableprompt's render): the next request of the conversation is segmented from
        ``line``'s bytes (:meth:`segment_rendered`) only when ``line`` is exactly the body's
        compact dump and names its history key once, so the history's place in it is
        certain (a compact ``"messages":[`` nested in a tool schema, or a duplicate key,
        would otherwise pass for it): checked when a later line first matches it, so a line
        no other line continues (a head that changes every turn) costs no check.

        Raises:
            CaptureError: as :meth:`segment`.
        """
        return self.segment(wire_format, body, content=line, checked=False)

    def _head(self, steps: SegmentSteps, body: Mapping[str, Any],
              outside_bytes: bytes | None = None) -> _Head:
        """The head's segments, data and chain state: the stored ones when a recent request
        had the same bytes outside its history (one dump of those fields, one lookup), else
        segmented and hashed. The head segmenters read only fields outside the history, so
        equal bytes there are equal head segments. ``outside_bytes``: JSON bytes the fields
        outside the history were decoded from (in place of their dump: bytes equal to a
        known dump decode to that head's values)."""
        outside = {k: v for k, v in body.items() if k != steps.history_key}
        key = (steps.wire_format, decoded_json(outside) if outside_bytes is None
               else outside_bytes)
        with self._lock:
            found = self._heads.get(key)
            if found is not None:
                self._heads.move_to_end(key)
                return found
        builder = SegmentBuilder(steps.marker_key, steps.wire_format, known=self._dumps.get(
            steps.wire_format, {}) if self.local_history else None)
        builder.params(body, steps.params)
        steps.head(body, builder)
        specs = builder.specs
        if self.local_history:  # a capture's values: the next heads' shared ones not dumped
            with self._lock:
                dumps = self._dumps.setdefault(steps.wire_format, {})
                if len(dumps) > _DUMPS:
                    dumps.clear()
                dumps.update(builder.dumped)
        with self._lock:
            last = self._last_head.get(steps.wire_format)
        same = 0  # leading specs equal to the last new head's (a system block changed)
        if last is not None:
            limit = min(len(specs), len(last[0]))
            while same < limit and (specs[same] is last[0][same] or
                                    specs[same] == last[0][same]):
                same += 1
        if same and last is not None:  # those segments are the last head's (same bytes,
            kept = last[1][:same]  # offsets and chain)
            made, data, previous = build_segments(
                specs[same:], start=kept[-1].end, previous=bytes.fromhex(kept[-1].prefix_digest))
            head = ((*kept, *made), last[2][:kept[-1].end] + data, previous, outside)
        else:
            head = (*build_segments(specs), outside)
        with self._lock:
            self._last_head[steps.wire_format] = (specs, head[0], head[1])
            self._heads[key] = head
            while len(self._heads) > self.max_lineages:
                self._heads.popitem(last=False)
        return head

    def segment_rendered(self, wire_format: str, content: bytes) -> Resegmented | None:
        """Segment a body stableprompt rendered, without parsing what its conversation's
        previous request already held: the history's position is known from the previous
        request (same bytes before it), the items it shares are found by byte comparison,
        only the new items are decoded (:func:`_fresh_items`), and the head is the previous
        one when the bytes after the history are too.

        Returns:
            ``None`` when this body is not such a continuation (first request of a
            conversation, another head, a body not rendered compact, a new item nested
            deeper than orjson writes): decode it and call :meth:`segment`.
        """
        steps = segment_steps(wire_format)
        needle = _needle(steps.history_key)
        before, at = None, 0
        with self._lock:
            # The kept bytes before a history name it only where they end (found as the
            # first occurrence of the key), so a body starting with them has its history
            # there too: try each kept length (latest first) instead of searching the body.
            for at in reversed(self._prefix_lengths.get(steps.wire_format, {})):
                if at >= len(needle) and content.startswith(needle, at + 1 - len(needle)):
                    before = next((p for p in self._prefixes.get(
                        _prefix_key(steps, content, at), ()) if content.startswith(p)), None)
                    if before is not None:
                        break
            candidates = {} if before is None else self._rendered.get(
                (steps.wire_format, before), {})
            key = next((k for opening, k in reversed(candidates.items())
                        if content.startswith(opening, at)), None)
            stored = None if key is None else self._stored.get(key)
            if stored is not None and not stored.checked:
                _check(steps, stored)
        if key is None or stored is None or stored.around is None or before is None \
                or stored.around[0] != before:
            return None
        done = bisect.bisect_right(stored.item_ends,
                                   common_prefix_bytes(content, stored.dump, offset=at))
        if not done:
            return None
        rest = at + stored.item_ends[done - 1]  # "," before a new item, or the closing "]"
        fresh = _fresh_items(content, rest, stored.around[1])
        if fresh is None:
            return None
        close = len(content) - len(stored.around[1]) - 1
        # the shared items and the new ones, no list of them all (one per conversation,
        # extended in place: Snapshot.then), in a view of the body (made only when read)
        items = stored.items.first(done).then(fresh)
        view = dict(stored.segmented._body_view)
        view[steps.history_key] = items
        dump = memoryview(content)[at:close + 1]  # kept for the next turn's comparison, uncopied
        try:
            return self._finish(steps, key, view, items, dump, done, stored,
                                _reused(stored, done, self.local_history), stored.around,
                                True, rebuilt=True)
        except (TypeError, _Unplaced):  # a new item nested deeper than orjson writes
            return None  # (segment says where), or marking a segment made before it

    def segment_reheaded(self, wire_format: str, content: bytes) -> Resegmented | None:
        """Segment a capture line (lint, :attr:`local_history`) that re-sends a stored
        line's history with other fields around it (a clock in the system prompt, before
        the history or after it: Claude Code sends ``model, messages, system, tools, ...``),
        without parsing what the stored line holds: the fields whose bytes the two lines
        share from their start are the stored body's values (each a whole member of the
        stored line, known to be its field's compact dump: :func:`_members`), the fields
        after them up to the history are decoded from their own bytes, the history's shared
        items are found by byte comparison and only the new items are decoded (as
        :meth:`segment_rendered`); after the history, the members whose bytes the lines
        share right after it and at the line's end are the stored body's values and those
        between are decoded alone (:func:`_after_members`). The line's bytes must be
        exactly those members, the history, the members after it and a closing ``}``: each
        part is decoded as JSON in its place (the decoded fields before the history end
        with its key, none named twice), so the body is the one
        :func:`~stableprompt._canonical.loads` returns for the line.

        Returns:
            ``None`` when this line is not such a continuation (no stored line with its
            history's opening, a stored line not known to be its body's compact dump, no
            member named as the stored line's first one after the history following a
            ``"]"``, nothing shared): decode it and call :meth:`segment_captured`.
        """
        if not self.local_history:
            return None
        steps = segment_steps(wire_format)
        needle = _needle(steps.history_key)
        where = content.find(needle)
        if where < 0:
            return None
        at = where + len(needle) - 1  # the history's "["
        with self._lock:
            key = None
            for size in reversed(self._opening_sizes.get(steps.wire_format, {})):
                key = self._openings.get((steps.wire_format, hash(content[at:at + size])))
                if key is not None:  # a candidate only: bytes decide below
                    break
            stored = None if key is None else self._stored.get(key)
        if key is None or stored is None or stored.around is None:
            return None
        done = bisect.bisect_right(stored.item_ends,  # first: the cheapest to fail
                                   common_prefix_bytes(content, stored.dump, offset=at))
        members = _members(steps, stored) if done else None
        if members is None:
            return None
        h = next(i for i, (name, _) in enumerate(members) if name == steps.history_key)
        shared = common_prefix_bytes(content, stored.around[0])
        n = 0  # members before the history whose bytes and the "," after them are shared
        while n < h and members[n][1] < shared:
            n += 1
        start = members[n - 1][1] + 1 if n else 1
        if not content.startswith(b"{") or where < start:
            return None
        try:
            middle = loads(b"{" + content[start:at] + b"[]}")
        except ValueError:
            return None
        if not isinstance(middle, dict) or not middle or next(reversed(middle)) != \
                steps.history_key or middle[steps.history_key] != []:
            return None
        rest = at + stored.item_ends[done - 1]  # "," before a new item, or the closing "]"
        after = _after_members(content, rest, stored, members[h + 1:])
        if after is None:
            return None
        close, tail, front, decoded, decoded_ends = after  # the history's "]", the rest
        names = [*(name for name, _ in members[:n]), *middle, *(name for name, _ in tail),
                 *decoded]
        if steps.marker_key in middle or steps.marker_key in decoded or \
                len(set(names)) != len(names):
            return None  # (a top-level marker marks the last item: segment reads it)
        fresh = _items_between(content, rest, close)
        if fresh is None:
            return None
        outside = stored.segmented._body_view
        view = {name: outside[name] for name, _ in members[:n]}  # the stored line's values
        view.update(middle)
        del view[steps.history_key]
        behind = {name: outside[name] for name, _ in tail[:front]}  # the line's order
        behind.update(decoded)
        behind.update((name, outside[name]) for name, _ in tail[front:])
        head: _Head | None = None
        # every field outside the history the stored line's (the decoded ones the history
        # alone): its head, else the head of these fields
        same = n == h and len(middle) == 1 and not decoded and \
            len(tail) == len(members) - h - 1
        if not same:
            try:  # (found by the line's bytes outside the history, closed)
                head = self._head(steps, {**view, **behind},
                                  _outside_bytes(content, where, close))
            except (CaptureError, TypeError):  # a head the format refuses (segment_captured
                return None  # says where), or nested deeper than orjson writes
            if head[2] is None:
                return None
            same = stored.segmented.segments[:stored.head] == head[0]
        items = stored.items.first(done).then(fresh)
        view[steps.history_key] = items
        view.update(behind)
        dump = memoryview(content)[at:close + 1]
        key = (steps.wire_format, key[1] if head is None or head[2] is None else head[2].hex(),
               hash(_opening(dump, items)))
        # where this line's members end: the shared ones' where they are, the decoded
        # ones' where their compact dumps end (else not known)
        found = _compact_members(middle.items(), steps.history_key, content, start)
        ends = None if found is None or found[1] != where or decoded_ends is None else \
            [*members[:n], *found[0], (steps.history_key, close + 1), *tail[:front],
             *decoded_ends, *tail[front:]]
        local = self.local_history
        base = _reused(stored, done, local) if same or head is None else \
            _rebased(stored, bytes(dump), head, local)
        if base is None:
            return None
        try:  # not kept for segment_rendered: the next line of this head comes here
            return self._finish(steps, key, view, items, dump, done, stored if same else None,
                                base, (content[:at], content[close + 1:]), False,
                                rebuilt=True, members=ends, rendered=False)
        except (TypeError, _Unplaced):  # a new item nested deeper than orjson writes
            return None  # (segment says where), or marking a segment made before it

    def _finish(self, steps: SegmentSteps, key: tuple[str, str, int], body: Mapping[str, Any],
                items: Snapshot[Any], dump: bytes | memoryview, done: int,
                stored: _Stored | None, base: _Base, around: tuple[bytes, bytes] | None,
                checked: bool, *, rebuilt: bool = False,
                members: list[tuple[str, int]] | None = None,
                rendered: bool = True) -> Resegmented:
        """Segments: ``base`` (``done`` items' segments, ``base.reused`` of them the same as
        ``stored``'s), then the rest of ``items`` made. ``body`` is the request's body, or
        with ``rebuilt`` its view (:meth:`SegmentedRequest._rebuilt`)."""
        reused, kept, previous, heads = base.reused, base.kept, base.previous, base.heads
        item_ends, item_segments = base.item_ends, base.item_segments
        leading_items, prefix = base.leading_items, base.prefix
        start = kept[-1].end if kept else 0  # from the history's start with a base.head
        before = 0 if base.head is None else len(base.head)  # segments before ``kept``
        fresh = SegmentBuilder(steps.marker_key, steps.wire_format)
        leading = leading_items == done
        end = begin = item_ends[-1] if item_ends else 0  # the "[" or "," before the new items
        pieces: list[bytes] = []  # the new items re-serialized
        for index, item in enumerate(items[done:], done):  # one slice: the new items
            leading = steps.item(fresh, item, index, leading)
            if leading and leading_items == index:
                leading_items += 1
            pieces.append(decoded_json(item))
            end += 1 + len(pieces[-1])  # "[" or "," before each item
            item_ends.append(end)
            item_segments.append(before + len(kept) + len(fresh.specs))
        if fresh.unplaced:  # a cachePoint opening a new item marks the segment before it,
            raise _Unplaced  # one of ``base``'s: segment_request marks it
        if rebuilt and items and (end + 1 != len(dump) or
                                  dump[begin + 1:end] != b",".join(pieces)):
            # ``dump`` is the content's own bytes (segment_rendered; segment's is the items'
            # re-serialization already), which do not re-serialize so (not compact; compared,
            # not only measured: two items whose lengths change by opposite amounts would
            # shift an item's end): the ends are of the re-serialized items
            dump, around = decoded_json(list(items)), None
            members = None
        specs, head = fresh.specs, base.head
        if head is not None and not kept:  # lint: the head's run of kinds goes on (leading
            lead = 0  # system items): those segments are chained after the head
            while lead < len(specs) and specs[lead].kind in HEAD_KINDS:
                lead += 1
            if lead:
                made, made_data, _ = build_segments(
                    specs[:lead], start=head[-1].end if head else 0,
                    previous=bytes.fromhex(head[-1].prefix_digest) if head else None)
                head, specs, prefix = (*head, *made), specs[lead:], [*prefix, made_data]
        new_segments, new_data, _ = build_segments(specs, start=start, previous=previous)
        segments: Sequence[Segment] = kept.then(new_segments)
        if head is not None:
            segments = HeadedSegments(head, segments)
        data = SegmentBytes.joined([*prefix, new_data])
        segmented = SegmentedRequest._rebuilt(
            steps.wire_format, segments, data, body, steps.history_key) if rebuilt else \
            SegmentedRequest(steps.wire_format, segments, data, body)
        if stored is not None and done > stored.leading and \
                "head_fingerprint" in stored.segmented.__dict__:
            # The head (params, tools, system, leading system items) ends inside the reused
            # segments: the stored request's head fingerprint is this one's (cached_property).
            segmented.__dict__["head_fingerprint"] = stored.segmented.head_fingerprint
        known = None if stored is None else stored.segmented.__dict__.get(BREAKPOINT_INDICES)
        if known is not None or not reused:  # the reused segments' markers are known
            marks = known[:bisect.bisect_left(known, reused)] if known is not None else []
            if not reused:  # the head's segments (and the rebased history's)
                marks = base.marks if base.marks is not None else [
                    i for i, seg in enumerate(itertools.chain(base.head or (), kept))
                    if seg.breakpoint]
            marks.extend(before + len(kept) + i for i, spec in enumerate(fresh.specs)
                         if spec.breakpoint)
            segmented.__dict__[BREAKPOINT_INDICES] = marks
        counted = stored if stored is not None and reused else None  # its token counts
        entry = _Stored(segmented, heads, dump, item_ends, item_segments, leading_items, items,
                        around=around, checked=checked,
                        members=members if around is not None else None)
        with self._lock:
            self._stored[key] = entry
            self._stored.move_to_end(key)
            self._openings[(key[0], key[2])] = key
            if self.local_history:  # the lengths segment_reheaded tries (latest last)
                sizes = self._opening_sizes.setdefault(steps.wire_format, {})
                size = len(_opening(dump, items))
                sizes.pop(size, None)
                sizes[size] = None
            if len(self._openings) > 4 * self.max_lineages:
                self._openings.clear()
                self._opening_sizes.clear()
            if around is not None and rendered:  # what segment_rendered looks up
                same_end = self._prefixes.setdefault(
                    _prefix_key(steps, around[0], len(around[0])), [])
                if not any(p is around[0] or p == around[0] for p in same_end):
                    same_end.append(around[0])
                lengths = self._prefix_lengths.setdefault(steps.wire_format, {})
                lengths.pop(len(around[0]), None)
                lengths[len(around[0])] = None  # latest last
                candidates = self._rendered.setdefault((steps.wire_format, around[0]), {})
                opening = _opening(dump, items)
                candidates.pop(opening, None)
                candidates[opening] = key  # most recent last
                while len(candidates) > self.max_lineages:
                    del candidates[next(iter(candidates))]
            while len(self._stored) > self.max_lineages:
                self._stored.popitem(last=False)
            if len(self._rendered) > 4 * self.max_lineages:
                self._rendered.clear()
                self._prefixes.clear()
                self._prefix_lengths.clear()
        return Resegmented(segmented, reused, None if counted is None else counted.tokens,
                           None if counted is None else counted.cumulative)

    def remember_tokens(self, segmented: SegmentedRequest, tokens: Sequence[int],
                        cumulative: Sequence[int] | None = None) -> None:
        """Keep ``tokens`` (one per segment; ``cumulative``: their running sums) with
        ``segmented`` when it is still its lineage's stored request, for the next request's
        reused segments."""
        # kept as given when immutable or an array (a request's own counts: the recorder's
        # RequestState holds arrays, which the garbage collector traverses in one step)
        kept = tokens if isinstance(tokens, (tuple, array)) else tuple(tokens)
        sums = cumulative if cumulative is None or isinstance(cumulative, (tuple, array)) \
            else tuple(cumulative)
        with self._lock:
            for entry in reversed(self._stored.values()):
                if entry.segmented is segmented:
                    entry.tokens, entry.cumulative = kept, sums
                    return


class _Unplaced(Exception):
    """A new item's marker marks a segment of the request's base (the reused ones, or the
    head), which :meth:`LineageSegments._finish` does not rebuild: segment the body whole."""


def _check(steps: SegmentSteps, stored: _Stored) -> None:
    """Keep ``stored.around`` (capture bytes) only if the line it came from is exactly the
    compact dump of the stored body and names its history key once (so the history's place
    in it is certain); else drop it (the next request of the conversation is parsed)."""
    if stored.around is not None:
        line = stored.around[0] + bytes(stored.dump) + stored.around[1]
        try:
            same = line.count(_needle(steps.history_key)) == 1 and \
                decoded_json(stored.segmented.body) == line
        except TypeError:  # nested deeper than orjson writes (> 254 levels): not its dump
            same = False
        if not same:
            stored.around = None
    stored.checked = True


def _members(steps: SegmentSteps, stored: _Stored) -> list[tuple[str, int]] | None:
    """Where each member of ``stored``'s line ends (:attr:`_Stored.members`), found once
    by dumping the body's fields and comparing them with the line's bytes in place (the
    line being ``around[0]``, the history's dump, ``around[1]``), or ``None`` when the line
    is not exactly that (then no other line is read from it by :meth:`LineageSegments.
    segment_reheaded`; ``[]`` is kept for it)."""
    if stored.members is None and stored.around is not None:
        stored.members = _member_ends(steps, stored.segmented._body_view, stored.around[0],
                                      len(stored.dump), stored.around[1])
    return stored.members or None


def _member_ends(steps: SegmentSteps, body: Mapping[str, Any], before: bytes,
                 history: int, after: bytes) -> list[tuple[str, int]]:
    """:func:`_members` of a line that is ``before``, ``history`` bytes, ``after``."""
    found = _compact_members(body.items(), steps.history_key, before, 1) \
        if before.startswith(b"{") else None
    if found is None or before[found[1]:] != _needle(steps.history_key)[:-1]:
        return []  # not compact members, then the history
    behind = list(itertools.islice(body.items(), len(found[0]) + 1, None))
    tail = _compact_members(behind, None, after, 1, last=b"}") \
        if after[:1] == (b"," if behind else b"}") else None
    if tail is None or tail[1] != len(after) or \
            len(found[0]) + 1 + len(behind) != len(body):
        return []  # not compact members after the history, closed
    end = len(before) + history  # the "," or "}" after the history
    return [*found[0], (steps.history_key, end), *((name, end + at) for name, at in tail[0])]


def _after_members(content: bytes, rest: int, stored: _Stored,
                   members: list[tuple[str, int]]
                   ) -> tuple[int, list[tuple[str, int]], int, dict[str, Any],
                              list[tuple[str, int]] | None] | None:
    """The members of ``content`` (a capture line) after its history, read against
    ``stored``'s line, whose members after its history are ``members`` (name, offset of
    the ``","`` or ``"}"`` after it; :func:`_members`): ``(close, shared, front, decoded,
    ends)``: the offset of the history's ``"]"``; the members whose bytes (and the
    separators around them) the two lines share, the first ``front`` of them right after
    the history, the others ending the line (name, offset of the separator after it in
    ``content``); the members between them decoded alone, in the line's order; where those
    end (``None``: not written as their compact dumps). ``None`` when the line does not
    end so: no member named as the stored line's first one right after a ``"]"`` past
    ``rest`` (the end of the history's shared items), or the bytes between the shared
    members not members. The history itself is not decoded here (:func:`_items_between`):
    any split of the line where each part decodes in its place is the line's (JSON values
    delimit themselves), so the first candidate ``"]"`` is the only one tried."""
    if not content.endswith(b"}"):
        return None
    if not members:  # the history last
        return len(content) - 2, [], 0, {}, []
    around = stored.around
    assert around is not None
    after = memoryview(around[1])  # "," then the members, "}"
    base = len(around[0]) + len(stored.dump)  # where ``after`` starts in the stored line
    ends = [end - base for _, end in members]  # their separators' offsets in ``after``
    close = content.find(b"]," + decoded_json(members[0][0]) + b":", rest)
    if close < 0:
        return None
    same = common_prefix_bytes(content, after, offset=close + 1)
    front = 0  # members after the history whose bytes and the separator after them match
    while front < len(members) and ends[front] < same:
        front += 1
    front_end = close + 1 + (ends[front - 1] if front else 0)  # the separator after them
    shift = len(content) - len(after)  # a member's offset in ``after`` -> in ``content``
    back, back_start = len(members), len(content) - 1  # the "}" (shared: the line ends so)
    while back > front:  # members ending the line with the separators around them
        begin = ends[back - 2] if back > 1 else 0
        if shift + begin < front_end or \
                not content.startswith(after[begin:ends[back - 1] + 1], shift + begin):
            break
        back, back_start = back - 1, shift + begin
    decoded: dict[str, Any] = {}
    decoded_ends: list[tuple[str, int]] | None = []
    if front_end != back_start:
        if front_end > back_start or content[front_end] != _COMMA:
            return None
        try:
            decoded = loads(b"{" + content[front_end + 1:back_start] + b"}")
        except ValueError:
            return None
        if not isinstance(decoded, dict) or not decoded:
            return None
        found = _compact_members(decoded.items(), None, content, front_end + 1,
                                 last=content[back_start:back_start + 1])
        decoded_ends = found[0] if found is not None and found[1] == back_start + 1 \
            else None
    shared = [(name, close + 1 + end) for (name, _), end in
              zip(members[:front], ends[:front], strict=True)]
    shared += [(name, shift + end) for (name, _), end in
               zip(members[back:], ends[back:], strict=True)]
    return close, shared, front, decoded, decoded_ends


def _outside_bytes(content: bytes, where: int, close: int) -> bytes | None:
    """The bytes of a capture line's members outside its history (``where``: its name,
    ``close``: its ``"]"``), as an object: the line without ``,"history":[...]``; ``None``
    when the history is the first member."""
    if content[where - 1] != _COMMA:
        return None
    return content[:where - 1] + content[close + 1:]


def _compact_members(members: Iterable[tuple[str, Any]], stop: str | None, content: bytes,
                     offset: int, *, last: bytes = b","
                     ) -> tuple[list[tuple[str, int]], int] | None:
    """Where each of ``members`` (name, value pairs, up to the one named ``stop``) ends in
    ``content`` read from ``offset`` on, each written there as its compact dump
    (:func:`_member`) and a ``","`` (``last`` after the last pair, when no ``stop`` ends
    them first): ``([(name, offset of its separator), ...], the offset after the last
    separator)``; ``None`` when one is not (other bytes, or nested deeper than orjson
    writes)."""
    ends: list[tuple[str, int]] = []
    pairs = list(members)
    for index, (name, value) in enumerate(pairs):
        if name == stop:
            break
        try:
            piece = _member(name, value)
        except TypeError:  # nested deeper than orjson writes: not a compact dump
            return None
        after = offset + len(piece)
        if not content.startswith(piece, offset) or content[after:after + 1] != \
                (last if index == len(pairs) - 1 else b","):
            return None
        ends.append((name, after))
        offset = after + 1
    return ends, offset


def _member(name: str, value: Any) -> bytes:
    """``"name":value`` as a compact dump of an object writes that member."""
    return decoded_json(name) + b":" + decoded_json(value)


def _fresh(head: _Head, local: bool) -> _Base:
    """Nothing reused: the head's segments, data and chain state only (``local``: the
    history's chain starts anew, :class:`_Base`)."""
    if local:
        return _Base(0, Snapshot(), [head[1]], None, array("q"), array("q"), 0,
                     len(head[0]), head[0], [i for i, s in enumerate(head[0]) if s.breakpoint])
    return _Base(0, Snapshot((head[0], len(head[0]))), [head[1]], head[2], array("q"),
                 array("q"), 0, len(head[0]))


def _reused(stored: _Stored, done: int, local: bool) -> _Base:
    """The first ``done`` history items of ``stored`` (same head), its segments as they are."""
    reused = stored.item_segments[done - 1]
    segments = stored.segmented.segments
    if local:
        assert type(segments) is HeadedSegments and isinstance(segments.history, Snapshot)
        head, kept = segments.head, segments.history.first(max(reused - segments.heads, 0))
        if reused < segments.heads:  # the items end among leading system items
            head = head[:reused]
        end = segments.shift + kept[-1].end if kept else head[-1].end
        return _Base(reused, kept, [stored.segmented.segment_bytes.span(0, end)],
                     bytes.fromhex(kept[-1].prefix_digest) if kept else None,
                     stored.item_ends[:done], stored.item_segments[:done],
                     min(stored.leading, done), stored.head, head)
    assert isinstance(segments, Snapshot)  # as _finish made them
    kept = segments.first(reused)
    last = kept[-1]
    return _Base(reused, kept, [stored.segmented.segment_bytes.span(0, last.end)],
                 bytes.fromhex(last.prefix_digest), stored.item_ends[:done],
                 stored.item_segments[:done], min(stored.leading, done), stored.head)


def _rebased(other: _Stored, dump: bytes, head: _Head, local: bool) -> _Base | None:
    """The history items ``dump`` shares with ``other`` (another head), their segments moved
    after ``head`` and chained from it; ``None`` when it shares none. A history item's
    segments depend on the item and its index only (what ``SegmentSteps.item`` reads), never
    on the head, except the chained prefix digest and the offsets, which are redone here
    (``local``: which the history's segments do not hold, so they are ``other``'s own, but
    leading system items, which a view holds in its head, are chained after ``head``)."""
    done = bisect.bisect_right(other.item_ends, common_prefix_bytes(dump, other.dump))
    if not done:
        return None
    old, data = other.segmented.segments, other.segmented.segment_bytes
    first, last = other.head, other.item_segments[done - 1]
    heads = len(head[0])
    item_segments = array("q", (n - first + heads for n in other.item_segments[:done]))
    if local:
        assert type(old) is HeadedSegments and isinstance(old.history, Snapshot)
        lead = old.head[first:min(last, old.heads)]  # leading system items' segments
        moved: list[Segment] = []
        begin = lead[0].start if lead else old.shift
        if lead:
            moved, _ = rechain(lead, data[begin:lead[-1].end], base=begin,
                               shift=len(head[1]) - begin, previous=head[2])
        kept = old.history.first(max(last - old.heads, 0))
        history = data.span(begin, old.shift + kept[-1].end if kept else
                            (lead[-1].end if lead else begin))
        full = (*head[0], *moved)
        marks = [i for i, s in enumerate(full) if s.breakpoint]
        known = other.segmented.__dict__.get(BREAKPOINT_INDICES)
        if known is None:
            marks.extend(len(full) + i for i, s in enumerate(kept) if s.breakpoint)
        else:
            marks.extend(m - first + heads for m in known[
                bisect.bisect_left(known, old.heads):bisect.bisect_left(known, last)])
        return _Base(0, kept, [head[1], history],
                     bytes.fromhex(kept[-1].prefix_digest) if kept else None,
                     other.item_ends[:done], item_segments, min(other.leading, done), heads,
                     full, marks)
    begin = old[first - 1].end if first else 0  # where ``other``'s history starts
    end = old[last - 1].end if last else begin
    history = data.span(begin, end)
    moved_all, previous = rechain(old[first:last], bytes(history), base=begin,
                                  shift=len(head[1]) - begin, previous=head[2])
    return _Base(0, Snapshot((head[0], heads), (moved_all, len(moved_all))),
                 [head[1], history], previous, other.item_ends[:done], item_segments,
                 min(other.leading, done), heads)


def breakpoint_indices(segmented: SegmentedRequest) -> list[int]:
    """Indices of the segments carrying a breakpoint marker, in order (computed once per
    request and kept on it; ``_resegment`` fills it from the previous request's for the
    segments it reuses)."""
    found: list[int] | None = segmented.__dict__.get(BREAKPOINT_INDICES)
    if found is None:
        found = [i for i, s in enumerate(segmented.segments) if s.breakpoint]
        segmented.__dict__[BREAKPOINT_INDICES] = found
    return found


BREAKPOINT_INDICES = "_breakpoint_indices"
"""Where :func:`breakpoint_indices` keeps its answer on a ``SegmentedRequest``."""


_OPENING = 512
"""At most this many bytes of the history's first item, with the lineage, key a stored
conversation (a key only finds a candidate: the byte comparison decides what is reused)."""


def _opening(dump: bytes | memoryview, items: Sequence[Any]) -> bytes:
    """``"["`` and the start of the first item (at most :data:`_OPENING` bytes of it)."""
    first = len(decoded_json(items[0])) if items else 0
    return bytes(dump[:1 + min(first, _OPENING)])


def _fresh_items(content: bytes, rest: int, after: bytes) -> list[Any] | None:
    """The items a history array holds after its first ones, which end at ``content[rest]``
    (a ``,`` before more items, or the closing ``]``), when the array is followed by exactly
    ``after`` (the bytes after the previous request's history: the same head); else
    ``None`` (:func:`_items_between`)."""
    if not content.endswith(after):
        return None
    return _items_between(content, rest, len(content) - len(after) - 1)


def _items_between(content: bytes, rest: int, close: int) -> list[Any] | None:
    """The items a history array holds after its first ones, which end at ``content[rest]``
    (a ``,`` before more items, or the closing ``]``), the array closed at ``close``;
    ``None`` when those bytes are not that. The new items' bytes are decoded by
    :func:`~stableprompt._canonical.loads` (one C call, as a full parse of the body
    would), nothing before them."""
    if close < rest or content[close] != _CLOSE:
        return None
    if rest == close:  # nothing appended
        return []
    if content[rest] != _COMMA:
        return None
    try:
        fresh = loads(b"[" + content[rest + 1:close] + b"]")
    except ValueError:
        return None
    return fresh if isinstance(fresh, list) and fresh else None  # "[a,]" is no array


_CLOSE, _COMMA = ord("]"), ord(",")


def _prefix_key(steps: SegmentSteps, content: bytes, at: int) -> tuple[str, int, bytes]:
    """What finds the kept bytes before a history at ``at`` (:attr:`LineageSegments.
    _prefixes`): the format, their length and their last 64 bytes (the end of the head)."""
    return (steps.wire_format, at, content[max(0, at - 64):at])


def _needle(history_key: str) -> bytes:
    return b'"' + history_key.encode() + b'":['
