"""Session ids as the report's tables show them: short, and still telling sessions apart.

Harnesses name sessions with long ids (Claude Code and Codex: 36-character UUIDs; Codex's
are UUIDv7, so ids of one day share their leading time digits; a ``metadata.user_id`` from
another harness can be longer still). A table column of full ids leaves no room for the
others, so the tables show each id without the prefix all shown ids share (cut from the
left, marked ``…``) and cut after :data:`SHORT_ID_CHARS` characters, longer only where two
ids would otherwise look alike. The JSON report keeps the full ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["SHORT_ID_CHARS", "short_form", "short_ids"]

SHORT_ID_CHARS = 8
"""Characters of an id kept after its shared prefix (more where two ids need them)."""

_MARK = "…"


def short_ids(ids: Iterable[str | None]) -> dict[str, str]:
    """The shown form of each distinct id of ``ids`` (``None`` left out): the id without the
    prefix all of them share (``…`` in its place), cut to :data:`SHORT_ID_CHARS` characters
    (``…`` after), with as many more characters as tell every two ids apart. An id of at
    most ``SHORT_ID_CHARS + 2`` characters, or not longer than its short form, is shown
    whole. (Holds every id: for ids read from a spill map, :func:`short_form`.)"""
    distinct = sorted({i for i in ids if i is not None})
    shorten = short_form(distinct)
    return {i: shorten(i) for i in distinct}


def short_form(sorted_ids: Iterable[str]) -> Callable[[str], str]:
    """:func:`short_ids` of ``sorted_ids`` as a function of one id, made in one pass that
    holds two ids at a time (``stableprompt report --by session``: every session, read from
    the report's temporary file in order, ~550,000 at 10M calls).

    Args:
        sorted_ids: Distinct ids in ascending order (``sorted``'s, by code point).

    Returns:
        ``shorten(id)``: the shown form of any of those ids (the same text
        ``short_ids(sorted_ids)[id]`` gives).

    The rule, in one pass: the prefix all ids share is the one the first and the last
    share; two ids look alike cut to ``w`` characters exactly when two neighbours in order
    do, so the width is one more than the longest prefix two neighbours share (at least
    :data:`SHORT_ID_CHARS`).
    """
    first = last = ""
    count = shortest = neighbours = 0  # neighbours: the longest prefix two neighbours share
    for i in sorted_ids:
        if count:
            neighbours = max(neighbours, _shared_prefix(last, i))
            shortest = min(shortest, len(i))
        else:
            first, shortest = i, len(i)
        last = i
        count += 1
    common = _shared_prefix(first, last) if count > 1 else 0
    # keep the shared prefix when cutting it would leave an id empty
    common = min(common, shortest - 1) if common else 0
    width = max(SHORT_ID_CHARS, neighbours - common + 1)

    def shorten(i: str) -> str:
        rest = i[common:]
        cut = rest[:width]
        text = (_MARK if common else "") + cut + (_MARK if len(rest) > width else "")
        return i if len(i) <= SHORT_ID_CHARS + 2 or len(text) >= len(i) else text

    return shorten


def _shared_prefix(first: str, last: str) -> int:
    """Characters the first and last of sorted strings share at their start: what all of
    them share (character by character: ids are no paths)."""
    n = 0
    for a, b in zip(first, last, strict=False):
        if a != b:
            break
        n += 1
    return n
