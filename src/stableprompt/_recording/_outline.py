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

What an outline cannot give (the predecessor's bytes): the byte offset inside the first
divergent segment, the cause of a mutation and its before/after snippet, the content-shape
rule, and the engine view's template check. A predecessor known by its outline is compared
segment by segment (``lcp_bytes`` ends at the first divergent segment).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .._ledger._usage_record import SEGMENT_DIGESTS_PATTERN
from .._segment import Segment, new_segment

__all__ = ["DIGEST_HEX", "MAX_SEGMENTS", "PATTERN", "Outline", "decode_outline",
           "encode_outline", "outline_common"]

DIGEST_HEX = 32
"""Hex digits kept of each chained prefix digest (16 bytes)."""

MAX_SEGMENTS = 4096
"""Segments beyond which a request's row keeps no outline (``encode_outline`` gives ``None``):
the column's bound, about 150 KB."""

_VERSION = "1"

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
    """

    segments: tuple[Segment, ...]
    tokens: list[int]
    opening: str | None


def encode_outline(segments: Sequence[Segment], tokens: Sequence[int]) -> str | None:
    """The ``segment_digests`` text of a request (module docstring): one pass over its
    ``segments`` and our token count of each (``tokens``, same order); ``None`` beyond
    :data:`MAX_SEGMENTS` segments.

    Raises:
        ValueError: ``tokens`` does not have one count per segment.
    """
    if len(tokens) != len(segments):
        raise ValueError(f"{len(tokens)} token counts for {len(segments)} segments")
    if len(segments) > MAX_SEGMENTS:
        return None
    kinds: list[str] = []
    marks: list[str] = []
    digests: list[str] = []
    opening = ""
    for i, s in enumerate(segments):
        kind = s.kind
        if kind == "message" and not opening:
            opening = s.digest
        kinds.append(_ROLE_LETTERS.get(s.label, "m") if kind == "message"
                     else _KIND_LETTERS.get(kind, "x"))
        if s.breakpoint:
            label = s.breakpoint if _TTL_LABEL.fullmatch(s.breakpoint) else "?"
            marks.append(f"{i}={label}")
        digests.append(s.prefix_digest[:DIGEST_HEX])
    return "|".join((_VERSION, "".join(kinds), ",".join(map(str, tokens)), ",".join(marks),
                     "".join(digests), opening))


def decode_outline(text: str) -> Outline | None:
    """The :class:`Outline` ``text`` records, or ``None`` when ``text`` is not a well-formed
    outline of this version (an unknown version is not guessed at)."""
    parts = text.split("|")
    if len(parts) != 6 or parts[0] != _VERSION:
        return None
    kinds, counts, marks, digests, opening = parts[1:]
    if opening and len(opening) != 64:
        return None
    n = len(kinds)
    try:
        tokens = [int(t) for t in counts.split(",")] if counts else []
        breakpoints = {int(i): label for i, _, label in
                       (mark.partition("=") for mark in marks.split(",") if mark)}
    except ValueError:
        return None
    if len(tokens) != n or len(digests) != n * DIGEST_HEX or any(
            not 0 <= i < n for i in breakpoints):
        return None
    segments = []
    for i, letter in enumerate(kinds):
        kind, label = _LETTER_KIND.get(letter, ("tail", ""))
        segments.append(new_segment(kind, "", 0, 0, "",
                                    digests[i * DIGEST_HEX:(i + 1) * DIGEST_HEX], tokens[i],
                                    "", breakpoints.get(i), label))
    return Outline(tuple(segments), tokens, opening or None)


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
