"""Segment a request body reusing the segments of the lineage's previous request.

An agent loop sends the same history again with a few items appended, so the recorder keeps,
per cache lineage, the last segmented request and where each history item's bytes end in the
compact dump of its history. A new request of the lineage is segmented as follows:

1. the head (cache-key params, tools, system) is segmented as usual (a few dozen segments);
2. when its segments equal the stored request's, the history is dumped once
   (:func:`~stableprompt._canonical.decoded_json`: one C call) and compared byte for byte
   with the stored dump: every stored item whose bytes lie inside the common byte prefix is
   the same JSON value with the same serialization at the same index, so its segments (bytes,
   offsets, digests, chained prefix digests, names, breakpoints) are the stored ones;
3. only the items after that are segmented, hashed and chained, continuing from the last
   reused prefix digest.

The result equals :func:`~stableprompt._wire._formats.segment_request` of the same body,
segment for segment (``tests/test_resegment.py`` checks it on random conversations). Bodies
this does not cover go the slow way: a history that is not a list, an Anthropic body with a
top-level ``cache_control`` (its automatic breakpoint marks the last block, wherever the
history ends). Cost of a request sharing its history: one dump and one byte comparison of
the history (C), plus Python work for the new items only.

The recorder also keeps each stored request's token counts here
(:meth:`LineageSegments.remember_tokens`), so the reused segments are not counted again.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._canonical import decoded_json
from .._segment import build_segments
from .._wire._formats import segment_request, segment_steps
from .._wire._segmenter import SegmentBuilder, SegmentedRequest

__all__ = ["LineageSegments", "Resegmented", "common_prefix_bytes"]

_CHUNK = 1 << 16


def common_prefix_bytes(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (C comparisons of 64 KiB
    slices, then a binary search inside the first differing one)."""
    limit = min(len(a), len(b))
    start = 0
    while start < limit:
        end = min(start + _CHUNK, limit)
        if a[start:end] != b[start:end]:
            low, high = start, end  # the answer is in [low, high)
            while high - low > 1:
                mid = (low + high) // 2
                if a[low:mid] == b[low:mid]:
                    low = mid
                else:
                    high = mid
            return low
        start = end
    return limit


@dataclass
class _Stored:
    """The last request of a lineage, as the next one needs it."""

    segmented: SegmentedRequest
    head: int  # segments before the history
    dump: bytes  # decoded_json of the history list
    item_ends: list[int]  # per item: offset in ``dump`` one past its last byte
    item_segments: list[int]  # per item: segments of the request through it (head included)
    leading: int  # how many items from the first returned ``leading=True``
    tokens: tuple[int, ...] | None = field(default=None)


@dataclass(frozen=True, slots=True)
class Resegmented:
    """A segmented request and what it shares with the lineage's previous one.

    Attributes:
        segmented: Equal to ``segment_request(wire_format, body)``.
        reused: Leading segments taken from the previous request (``0``: none).
        previous_tokens: The previous request's token counts (one per segment, as the
            recorder counted them), when it stored them and ``reused > 0``.
    """

    segmented: SegmentedRequest
    reused: int = 0
    previous_tokens: tuple[int, ...] | None = None


class LineageSegments:
    """Per-lineage memory of the last segmented request (bounded, thread-safe).

    Args:
        max_lineages: Conversations kept (lineage and opening item; least recently used
            dropped). Each holds one request's
            segments and the compact dump of its history (about the body's size).
    """

    def __init__(self, max_lineages: int = 16) -> None:
        self.max_lineages = max_lineages
        self._stored: OrderedDict[tuple[str, str, int], _Stored] = OrderedDict()
        self._lock = threading.Lock()

    def segment(self, wire_format: str, body: Mapping[str, Any]) -> Resegmented:
        """Segment ``body`` (decoded by :func:`~stableprompt._canonical.loads`), reusing the
        segments it shares with its lineage's previous request.

        Raises:
            CaptureError: as :func:`~stableprompt._wire._formats.segment_request`.
        """
        steps = segment_steps(wire_format)
        items = body.get(steps.history_key) if isinstance(body, Mapping) else None
        if not isinstance(items, list) or steps.marker_key in body:
            return Resegmented(segment_request(wire_format, body))
        builder = SegmentBuilder(steps.marker_key)
        builder.params(body, steps.params)
        steps.head(body, builder)
        head_segments, head_data, head_digest = build_segments(builder.specs)
        if head_digest is None:  # no params, tools or system (a body without a model)
            return Resegmented(segment_request(wire_format, body))
        # Keyed by lineage and opening item: conversations sharing a head do not evict each
        # other (the key only finds a candidate; the byte comparison decides what is reused).
        opening = hash(decoded_json(items[0])) if items else 0
        key = (steps.wire_format, head_digest.hex(), opening)
        dump = decoded_json(items)
        with self._lock:
            stored = self._stored.get(key)
            if stored is not None:
                self._stored.move_to_end(key)
        done = 0  # history items reused
        if stored is not None and stored.segmented.segments[:stored.head] == head_segments:
            done = bisect.bisect_right(stored.item_ends,
                                       common_prefix_bytes(dump, stored.dump))
        if done:
            assert stored is not None
            reused = stored.item_segments[done - 1]
            kept = stored.segmented.segments[:reused]
            last = kept[-1]
            start, previous = last.end, bytes.fromhex(last.prefix_digest)
            item_ends, item_segments = stored.item_ends[:done], stored.item_segments[:done]
            leading_items = min(stored.leading, done)
            prefix: Sequence[bytes | memoryview] = [memoryview(stored.segmented.data)[:start]]
        else:
            reused, kept = 0, head_segments
            start, previous = len(head_data), head_digest
            item_ends, item_segments, leading_items = [], [], 0
            prefix = [head_data]
        fresh = SegmentBuilder(steps.marker_key)
        leading = leading_items == done
        end = item_ends[-1] if item_ends else 0
        for index in range(done, len(items)):
            item = items[index]
            leading = steps.item(fresh, item, index, leading)
            if leading and leading_items == index:
                leading_items += 1
            end += 1 + len(decoded_json(item))  # "[" or "," before each item
            item_ends.append(end)
            item_segments.append(len(kept) + len(fresh.specs))
        new_segments, new_data, _ = build_segments(fresh.specs, start=start, previous=previous)
        segmented = SegmentedRequest(steps.wire_format, kept + new_segments,
                                     b"".join([*prefix, new_data]), body)
        if stored is not None and done > stored.leading and \
                "head_fingerprint" in stored.segmented.__dict__:
            # The head (params, tools, system, leading system items) ends inside the reused
            # segments: the stored request's head fingerprint is this one's (cached_property).
            segmented.__dict__["head_fingerprint"] = stored.segmented.head_fingerprint
        stored_tokens = stored.tokens if stored is not None and reused else None
        entry = _Stored(segmented, len(head_segments), dump, item_ends, item_segments,
                        leading_items)
        with self._lock:
            self._stored[key] = entry
            self._stored.move_to_end(key)
            while len(self._stored) > self.max_lineages:
                self._stored.popitem(last=False)
        return Resegmented(segmented, reused, stored_tokens)

    def remember_tokens(self, segmented: SegmentedRequest, tokens: Sequence[int]) -> None:
        """Keep ``tokens`` (one per segment) with ``segmented`` when it is still its
        lineage's stored request, for the next request's reused segments."""
        with self._lock:
            for entry in reversed(self._stored.values()):
                if entry.segmented is segmented:
                    entry.tokens = tuple(tokens)
                    return
