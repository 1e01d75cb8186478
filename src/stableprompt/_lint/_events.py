"""Deliberate breaks: which :class:`~stableprompt.CacheEvent` explains a divergence.

A compaction (:meth:`Conversation.compact`) or a head change (:meth:`Conversation.rebase`)
breaks the cached prefix on purpose. ``lint_requests(events=...)`` and
``assert_prefix_stable(events=...)`` take those events and report the break each one explains
as expected instead of failing. Events carry render fingerprints, not wire bytes, so a request
is matched by what any wire format keeps:

- ``compaction``: the divergence is in the history (a message, not the head) and the later
  request holds the event's ``summary`` text (JSON-escaped, as every wire format sends it) in
  a message at or after the divergent segment. An event without ``summary`` explains the
  next history break.
- ``head-change``: the divergence is in the head (a cache-key parameter, a tool or the
  system).

Events are consumed in order: each explains at most one break, the earliest one it fits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._canonical import canonical_json
from .._diff import Divergence, Segmented
from .._exceptions import InputError
from .._segment import HEAD_KINDS

__all__ = ["EventQueue"]

_KINDS = ("compaction", "head-change")


class EventQueue:
    """Pending cache events; :meth:`explain` consumes the first one that fits a break."""

    def __init__(self, events: Iterable[Any] | None) -> None:
        self._pending: list[tuple[str, bytes | None]] = []
        if events is None:
            return
        if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
            raise InputError(f"events must be a list of CacheEvent, got "
                             f"{type(events).__name__}", code="lint-events")
        for i, event in enumerate(events):
            kind = getattr(event, "kind", None)
            if kind not in _KINDS or not hasattr(event, "prefix_after"):
                raise InputError(f"events[{i}] is a {type(event).__name__}, not a CacheEvent "
                                 "(from Conversation.compact or Conversation.rebase)",
                                 code="lint-events", pointer=f"/events/{i}")
            summary = getattr(event, "summary", None)
            needle = canonical_json(summary)[1:-1] if isinstance(summary, str) else None
            self._pending.append((kind, needle))

    def __len__(self) -> int:
        return len(self._pending)

    def compaction_in(self, b: Segmented) -> bool:
        """Whether ``b`` holds the summary of a pending compaction (nothing consumed): an
        opening request that restarts a history on purpose, to pair with its lineage."""
        return any(kind == "compaction" and needle is not None and _holds(b, 0, needle)
                   for kind, needle in self._pending)

    def explain(self, b: Segmented, divergence: Divergence) -> str | None:
        """Consume and return the kind of the first pending event that explains the break
        ``divergence`` of the later request ``b``, or ``None`` (nothing consumed)."""
        in_head = divergence.segment_kind in HEAD_KINDS
        for i, (kind, needle) in enumerate(self._pending):
            if kind == "head-change" and in_head:
                del self._pending[i]
                return kind
            if kind == "compaction" and not in_head and (
                    needle is None or _holds(b, divergence.segment_index, needle)):
                del self._pending[i]
                return kind
        return None


def _holds(b: Segmented, start: int, needle: bytes) -> bool:
    """Whether a message segment of ``b`` at or after index ``start`` contains ``needle``."""
    data = b.data
    for s in b.segments[start:]:
        if s.kind == "message" and data.find(needle, s.start, s.end) >= 0:
            return True
    return False
