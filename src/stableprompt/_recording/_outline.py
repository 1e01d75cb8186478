"""A request's segment outline: what attribution needs of a predecessor without its body.

A ledger row keeps its request body only with ``store_content`` (off by default in the
proxy). Another process reading the row (a shared ledger: ``Ledger.shared``, PostgreSQL, a
fleet of proxies) still has to compare the next turn with it as the recorder that wrote it
would have: how many leading segments the two share, where the predecessor's cache
breakpoints were (with their TTLs), and our token count up to each. The row's
``segment_digests`` column (schema v4) holds exactly that, as one text value::

    1|<kinds>|<tokens>|<breakpoints>|<prefix digests>|<opening>

- ``1``: the format version.
- ``<kinds>``: one letter per segment: ``p`` param, ``t`` tool, ``s`` system, ``x`` tail,
  and for a message its role: ``u`` user, ``a`` assistant, ``o`` tool result, ``m`` other
  (attribution reads a predecessor's roles only to find its last user or tool message: the
  implicit breakpoint of OpenAI's GPT-5.6+).
- ``<tokens>``: our token count of each segment, decimal, comma-separated.
- ``<breakpoints>``: ``index=ttl`` for each segment carrying a cache breakpoint,
  comma-separated (``3=5m,7=1h``); a TTL label outside ``[0-9a-z]{1,8}`` is stored as
  ``?``, which the TTL table reads as the default TTL, as it reads an unknown label.
- ``<prefix digests>``: the first :data:`DIGEST_HEX` hex digits (16 bytes) of each segment's
  chained prefix digest (``_segment``), concatenated. Chained, so segment ``i`` of two
  requests agrees exactly when their first ``i + 1`` segments do; 128 bits leave a
  collision between two different prefixes at about 2^-64 even after 2^32 prefixes.
- ``<opening>``: the whole (64 hex digits, not chained) digest of the first message segment,
  or nothing without messages: what names a conversation without session id
  (``_predecessor.opening_of``), so another host's calls of it are its own turns.

Size: about 37 bytes per segment (32 hex digits, a letter, a token count and a comma) and 64
for the opening, made in one pass over the request's segments the recorder already holds (no
history is re-read; ~0.2-0.5 us a segment); on the demo ledgers (18-23 segments per request)
+720 to +885 bytes per row (from 1.2-1.8 KB to 2.1-2.5 KB). Bounded: a request of more than
:data:`MAX_SEGMENTS` segments gets no outline (at most ~150 KB per row; its row is then
compared by its request fingerprint, as a row from before schema v4 is).
Every character is from a fixed lowercase alphabet (:data:`PATTERN`): the value can hold no
caller text and no key, so the ledger does not scrub it.

Format 2, a delta, for a request that continues its predecessor's row (the same lineage,
at least :data:`MIN_SHARED_SEGMENTS` leading segments shared, that row's outline at most
:data:`MAX_DEPTH` deltas deep)::

    2|<base record id>|<shared>|<kinds>|<tokens>|<breakpoints>|<prefix digests>|<opening>

The first ``<shared>`` segments are the base row's (kinds, token counts, digests), the fields
after hold only this request's segments from there on, and ``<breakpoints>`` are all of this
request's (a breakpoint moves on each turn). So a conversation's rows cost in proportion to
what each request adds: on the demo ledger (4,983 calls) 7.5 MB of outlines became 3.0 MB, a
late turn's outline 1.9 KB became 224 bytes. Reading one takes the base's outline (the
reader's cache, the lineage rows it read, else the ledger by record id), at most
:data:`MAX_DEPTH` rows deep: every :data:`MAX_DEPTH` + 1st row of a chain is whole. A delta
whose base is gone (another ledger) reads as no outline (compared by fingerprint); a row
kept by :meth:`Ledger.prune <stableprompt.Ledger.prune>` whose base it deletes is rewritten
whole first (``_ledger._outline_text.whole_outline``).

What an outline cannot give (the predecessor's bytes): the byte offset inside the first
divergent segment, the cause of a mutation and its before/after snippet, the content-shape
rule, and the engine view's template check. A predecessor known by its outline is compared
segment by segment (``lcp_bytes`` ends at the first divergent segment).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .._ledger._outline_text import DIGEST_HEX, MAX_DEPTH, RECORD_ID, delta_base
from .._ledger._usage_record import SEGMENT_DIGESTS_PATTERN
from .._segment import Segment, new_segment
from ._call import Pending

__all__ = ["DIGEST_HEX", "MAX_DEPTH", "MAX_SEGMENTS", "MIN_SHARED_SEGMENTS", "PATTERN",
           "Outline", "decode_outline", "encode_outline", "outline_base", "outline_common"]


MAX_SEGMENTS = 4096
"""Segments beyond which a request's row keeps no outline (``encode_outline`` gives ``None``):
the column's bound, about 150 KB."""

_VERSION = "1"
_DELTA = "2"

MIN_SHARED_SEGMENTS = 8
"""Leading segments a request must share with its predecessor's row for its outline to be
stored as a delta (fewer: whole, it is short anyway)."""

_KIND_LETTERS = {"param": "p", "tool": "t", "system": "s", "tail": "x"}
_ROLE_LETTERS = {"user": "u", "assistant": "a", "tool": "o"}
_LETTER_KIND = {"p": ("param", ""), "t": ("tool", ""), "s": ("system", ""), "x": ("tail", ""),
                "u": ("message", "user"), "a": ("message", "assistant"),
                "o": ("message", "tool"), "m": ("message", "")}
_TTL_LABEL = re.compile(r"[0-9a-z]{1,8}")

PATTERN = SEGMENT_DIGESTS_PATTERN
"""The values ``UsageRecord.segment_digests`` accepts (validated on every record)."""


@dataclass(frozen=True, slots=True)
class Outline:
    """A decoded outline.

    Attributes:
        segments: Per segment its kind, role label (``user``, ``assistant``, ``tool`` or
            ``""``), breakpoint TTL label and the first :data:`DIGEST_HEX` hex digits of its
            chained ``prefix_digest``; no name, path, bytes or own digest.
        tokens: Our token count of each segment.
        opening: The first message segment's own digest (64 hex digits), or ``None``.
        depth: Delta outlines read to make it (0: stored whole).
    """

    segments: tuple[Segment, ...]
    tokens: list[int]
    opening: str | None
    depth: int = 0


def encode_outline(segments: Sequence[Segment], tokens: Sequence[int],
                   base: tuple[str, int] | None = None) -> str | None:
    """The ``segment_digests`` text of a request (module docstring): one pass over its
    ``segments`` and our token count of each (``tokens``, same order); ``None`` beyond
    :data:`MAX_SEGMENTS` segments. With ``base`` (``(record id, shared)``: the row whose
    outline holds this request's first ``shared`` segments), the delta form (format 2): only
    the segments from ``shared`` on, so a conversation's rows cost in proportion to what
    each request adds.

    Raises:
        ValueError: ``tokens`` does not have one count per segment, or ``base`` shares more
            segments than there are.
    """
    if len(tokens) != len(segments):
        raise ValueError(f"{len(tokens)} token counts for {len(segments)} segments")
    if len(segments) > MAX_SEGMENTS:
        return None
    if base is not None and not 0 < base[1] <= len(segments):
        raise ValueError(f"a base sharing {base[1]} of {len(segments)} segments")
    start = 0 if base is None else base[1]
    kinds: list[str] = []
    marks: list[str] = []
    digests: list[str] = []
    opening = ""
    for i, s in enumerate(segments):
        kind = s.kind
        if kind == "message" and not opening:
            opening = s.digest
        if s.breakpoint:
            label = s.breakpoint if _TTL_LABEL.fullmatch(s.breakpoint) else "?"
            marks.append(f"{i}={label}")
        if i < start:
            continue
        kinds.append(_ROLE_LETTERS.get(s.label, "m") if kind == "message"
                     else _KIND_LETTERS.get(kind, "x"))
        digests.append(s.prefix_digest[:DIGEST_HEX])
    counts = ",".join(map(str, tokens[start:]))
    tail = ("".join(kinds), counts, ",".join(marks), "".join(digests), opening)
    if base is None:
        return "|".join((_VERSION, *tail))
    return "|".join((_DELTA, base[0], str(start), *tail))


def row_outline(pending: Pending) -> tuple[str | None, int | None]:
    """The ``segment_digests`` of a call's row and its delta depth (``RequestState.
    outline_depth``), encoded once per call (its provisional and final rows share it).

    A delta of the compared request's row (format 2) when that request is of the same
    lineage, was itself stored with an outline fewer than :data:`MAX_DEPTH` deltas deep, and
    shares at least :data:`MIN_SHARED_SEGMENTS` leading segments; else whole (format 1), or
    ``(None, None)`` without segments and token counts or beyond :data:`MAX_SEGMENTS`."""
    state = pending.state
    memo = pending.outline
    if memo is not None and memo[0] is state:
        return memo[1], memo[2]
    text: str | None = None
    depth: int | None = None
    if state is not None and state.segmented is not None and state.segment_tokens is not None:
        base = pending.comparison.predecessor
        shared = pending.comparison.common_segments
        plan = None
        if (base is not None and base.record_id is not None and base.outline_depth is not None
                and base.outline_depth < MAX_DEPTH and shared >= MIN_SHARED_SEGMENTS
                and base.head_fingerprint == state.head_fingerprint):
            plan = (base.record_id, min(shared, len(state.segmented.segments)))
        text = encode_outline(state.segmented.segments, state.segment_tokens, plan)
        if text is not None:
            depth = 0 if plan is None or base is None or base.outline_depth is None else (
                base.outline_depth + 1)
    if state is not None:
        pending.outline = (state, text, depth)
    return text, depth


outline_base = delta_base
"""The record id of the row a delta outline (format 2) continues, else ``None``
(``_ledger._outline_text.delta_base``: the ledger reads it too, when it prunes)."""


def decode_outline(text: str,
                   resolve: Callable[[str], Outline | None] | None = None) -> Outline | None:
    """The :class:`Outline` ``text`` records, or ``None`` when ``text`` is not a well-formed
    outline of a known version (an unknown version is not guessed at), or is a delta whose
    base ``resolve`` (a record id to its row's decoded outline) cannot give, gives with
    fewer segments than it shares, or gives :data:`MAX_DEPTH` deep already."""
    parts = text.split("|")
    prefix: Sequence[Segment] = ()
    prefix_tokens: list[int] = []
    depth = 0
    if len(parts) == 8 and parts[0] == _DELTA:
        base_id, shared = parts[1], parts[2]
        if resolve is None or not RECORD_ID.fullmatch(base_id) or not shared.isdigit():
            return None
        base = resolve(base_id)
        start = int(shared)
        if base is None or base.depth >= MAX_DEPTH or not 0 < start <= len(base.segments):
            return None
        prefix, prefix_tokens, depth = base.segments[:start], base.tokens[:start], base.depth + 1
        parts = [_VERSION, *parts[3:]]
    if len(parts) != 6 or parts[0] != _VERSION:
        return None
    kinds, counts, marks, digests, opening = parts[1:]
    if opening and len(opening) != 64:
        return None
    start = len(prefix)
    n = len(kinds)
    try:
        tokens = [int(t) for t in counts.split(",")] if counts else []
        breakpoints = {int(i): label for i, _, label in
                       (mark.partition("=") for mark in marks.split(",") if mark)}
    except ValueError:
        return None
    if len(tokens) != n or len(digests) != n * DIGEST_HEX or any(
            not 0 <= i < start + n for i in breakpoints):
        return None
    segments = [replace_breakpoint(s, breakpoints.get(i)) for i, s in enumerate(prefix)]
    for i, letter in enumerate(kinds):
        kind, label = _LETTER_KIND.get(letter, ("tail", ""))
        segments.append(new_segment(kind, "", 0, 0, "",
                                    digests[i * DIGEST_HEX:(i + 1) * DIGEST_HEX], tokens[i],
                                    "", breakpoints.get(start + i), label))
    return Outline(tuple(segments), [*prefix_tokens, *tokens], opening or None, depth)


def replace_breakpoint(segment: Segment, breakpoint: str | None) -> Segment:
    """An outline segment with this request's breakpoint (a delta's shared segments take
    their breakpoints from the later request, not from its base)."""
    if segment.breakpoint == breakpoint:
        return segment
    return new_segment(segment.kind, "", 0, 0, "", segment.prefix_digest, segment.tokens, "",
                       breakpoint, segment.label)


def outline_common(outline: Sequence[Segment], segments: Sequence[Segment],
                   start: int = 0) -> int:
    """Leading segments of ``segments`` (a request, full digests) shared with ``outline`` (a
    decoded predecessor, truncated digests), knowing the first ``start`` are: a binary search
    on the chained digests (they agree through ``i`` exactly when the first ``i + 1``
    segments do), so O(log n) digest comparisons."""
    lo, hi = start, min(len(outline), len(segments))
    while lo < hi:  # invariant: the first ``lo`` agree; none from ``hi`` on is known to
        mid = (lo + hi) // 2
        if outline[mid].prefix_digest == segments[mid].prefix_digest[:DIGEST_HEX]:
            lo = mid + 1
        else:
            hi = mid
    return lo
