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

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ._public import public

__all__ = [
    "FINGERPRINT_TAG",
    "HEAD_KINDS",
    "Segment",
    "SegmentSpec",
    "build_segments",
    "chain",
    "fingerprint_of",
    "sum_tokens",
    "tag",
]

FINGERPRINT_TAG = "sp1"
_ROOT = hashlib.sha256(FINGERPRINT_TAG.encode()).digest()

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


def chain(previous: bytes | None, kind: str, data: bytes) -> bytes:
    """Return ``SHA-256(previous || kind || 0x00 || data)`` (raw 32 bytes).

    ``previous=None`` starts a new chain from the ``sp1`` root.
    """
    h = hashlib.sha256(_ROOT if previous is None else previous)
    h.update(kind.encode())
    h.update(b"\0")
    h.update(data)
    return h.digest()


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
    for index, spec in enumerate(specs):
        digest = chain(digest, spec.kind, spec.data)
        end = offset + len(spec.data)
        out.append(
            Segment(
                kind=spec.kind,
                name=spec.name,
                start=offset,
                end=end,
                digest=hashlib.sha256(spec.data).hexdigest(),
                prefix_digest=digest.hex(),
                tokens=None if token_counts is None else token_counts[index],
                path=spec.path,
                breakpoint=spec.breakpoint,
                label=spec.label,
            )
        )
        parts.append(spec.data)
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
