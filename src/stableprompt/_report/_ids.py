"""Session ids as the report's tables show them: short, and still telling sessions apart.

Harnesses name sessions with long ids (Claude Code and Codex: 36-character UUIDs; Codex's
are UUIDv7, so ids of one day share their leading time digits; a ``metadata.user_id`` from
another harness can be longer still). A table column of full ids leaves no room for the
others, so the tables show each id without the prefix all shown ids share (cut from the
left, marked ``…``) and cut after :data:`SHORT_ID_CHARS` characters, longer only where two
ids would otherwise look alike. The JSON report keeps the full ids.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["SHORT_ID_CHARS", "short_ids"]

SHORT_ID_CHARS = 8
"""Characters of an id kept after its shared prefix (more where two ids need them)."""

_MARK = "…"


def short_ids(ids: Iterable[str | None]) -> dict[str, str]:
    """The shown form of each distinct id of ``ids`` (``None`` left out): the id without the
    prefix all of them share (``…`` in its place), cut to :data:`SHORT_ID_CHARS` characters
    (``…`` after), with as many more characters as tell every two ids apart. An id of at
    most ``SHORT_ID_CHARS + 2`` characters, or not longer than its short form, is shown
    whole."""
    distinct = sorted({i for i in ids if i is not None})
    if not distinct:
        return {}
    common = _shared_prefix(distinct[0], distinct[-1]) if len(distinct) > 1 else 0
    # keep the shared prefix when cutting it would leave an id empty
    common = min(common, min(len(i) for i in distinct) - 1) if common else 0
    rests = {i: i[common:] for i in distinct}
    width = SHORT_ID_CHARS
    while len({r[:width] for r in rests.values()}) < len(rests):
        width += 1
    shown = {}
    for i, rest in rests.items():
        cut = rest[:width]
        text = (_MARK if common else "") + cut + (_MARK if len(rest) > width else "")
        shown[i] = i if len(i) <= SHORT_ID_CHARS + 2 or len(text) >= len(i) else text
    return shown


def _shared_prefix(first: str, last: str) -> int:
    """Characters the first and last of sorted strings share at their start: what all of
    them share (character by character: ids are no paths)."""
    n = 0
    for a, b in zip(first, last, strict=False):
        if a != b:
            break
        n += 1
    return n
