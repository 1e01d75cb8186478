"""Every divergence of a request from its predecessor, in the provider's cache order.

:func:`~stableprompt._diff.diff` names the first divergence: the one that costs the cache.
A harness usually breaks its prefix in more than one place at once (a resume that edits a tool
text and a system text; a turn that inserts history, re-serializes it and re-orders a file
list), and fixing the first only reveals the next. :func:`divergences` lists them all, the
first being ``diff``'s, each with where (segment, JSON pointer on both sides), why (a
:data:`~stableprompt._diff.CAUSES` slug and its detail), a snippet of both sides, and what it
costs once every earlier one is fixed (``lost_bytes``, and ``lost_tokens`` when the segments
carry token counts).

Walk, by region, in cache order: cache-key parameters by name; tools by name (one
``tool-removed``, one ``tool-added`` and one ``tool-reorder`` for the list, and each tool
re-sent with other bytes); system blocks by position; history items aligned by their bytes
(:func:`~stableprompt._diff._history.history_ops`: ``history-insert``, ``history-delete``,
``history-move``, and each item changed in place, by its first differing block). A region's
changes are sorted by the predecessor's segment index; the predecessor's trailing volatile
tail is left out as :func:`diff` leaves it out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .._public import public
from .._segment import Segment
from ._first import (
    Divergence,
    Segmented,
    _bytes,
    _cacheable,
    _classify_pair,
    _comparable,
    _snippet,
    common_prefix_len,
    diff,
    history_cause,
    item_alike,
    tokens_after,
)
from ._history import history_ops, item_of

__all__ = ["DIVERGENCE_LIMIT", "bounded_divergences", "divergences"]

DIVERGENCE_LIMIT = 8
"""Divergences kept per call in a ledger row's ``verdict_detail["divergences"]`` (the first
and the next seven in cache order); ``divergences_total`` says how many there were."""

_Found = tuple[int, int, str, str, str, str, Segment | None, Segment | None]
"""(predecessor segment index, later request segment index, cause, detail, path, path_b,
x, y) of one divergence before its offsets and snippets are cut."""


def _first(segments: Sequence[Segment], kind: str) -> int:
    """Index of the first segment of ``kind`` (or of a later kind in cache order), else the
    end."""
    order = ("param", "tool", "system", "message", "tail")
    rank = order.index(kind)
    return next((i for i, s in enumerate(segments) if order.index(s.kind) >= rank),
                len(segments))


def _by_label(segments: Sequence[Segment], kind: str) -> dict[str, int]:
    """Index of the first head segment of ``kind`` per label (name): the head only (it comes
    first in cache order), never the history."""
    found: dict[str, int] = {}
    for i, s in enumerate(segments):
        if s.kind in ("message", "tail"):
            break
        if s.kind == kind:
            found.setdefault(s.label or s.name, i)
    return found


def _walk(a: Segmented, b: Segmented, sa: Sequence[Segment],
          sb: Sequence[Segment]) -> Iterator[_Found]:
    """Every change, region by region in cache order (unsorted within nothing: each region's
    list is sorted by predecessor index)."""
    # Parameters, by name.
    params_a, params_b = _by_label(sa, "param"), _by_label(sb, "param")
    found: list[_Found] = []
    for name, i in params_a.items():
        j = params_b.get(name)
        y = sb[j] if j is not None else None
        if y is None or y.digest != sa[i].digest:
            cause = "model-change" if name == "model" else "param-change"
            found.append((i, j if j is not None else _first(sb, "tool"), cause, name,
                          f"/{name}", "", sa[i], y))
    for name, j in params_b.items():
        if name not in params_a:
            cause = "model-change" if name == "model" else "param-change"
            found.append((_first(sa, "tool"), j, cause, name, f"/{name}", "", None, sb[j]))
    yield from sorted(found, key=lambda f: f[0])
    # Tools, by name: the list's changes once each, then each tool whose bytes changed.
    tools_a, tools_b = _by_label(sa, "tool"), _by_label(sb, "tool")
    found = []
    removed = [n for n in tools_a if n not in tools_b]
    added = [n for n in tools_b if n not in tools_a]
    if removed:
        i = tools_a[removed[0]]
        found.append((i, _first(sb, "system"), "tool-removed", ", ".join(sorted(removed)),
                      sa[i].path, "", sa[i], None))
    if added:
        j = tools_b[added[0]]
        at = min((tools_a[n] for n in list(tools_b)[list(tools_b).index(added[0]):]
                  if n in tools_a), default=_first(sa, "system"))
        found.append((at, j, "tool-added", ", ".join(sorted(added)), sb[j].path, sb[j].path,
                      None, sb[j]))
    common_a = [n for n in tools_a if n in tools_b]
    common_b = [n for n in tools_b if n in tools_a]
    if common_a != common_b:
        k = next(k for k, (p, q) in enumerate(zip(common_a, common_b, strict=True)) if p != q)
        i, j = tools_a[common_a[k]], tools_b[common_b[k]]
        found.append((i, j, "tool-reorder", f"{common_a[k]} -> {common_b[k]} at "
                      f"{sa[i].name}", sa[i].path, sb[j].path, sa[i], sb[j]))
    for name in common_a:
        i, j = tools_a[name], tools_b[name]
        if sa[i].digest != sb[j].digest:
            found.append((i, j, "", "", "", "", sa[i], sb[j]))
    yield from sorted(found, key=lambda f: f[0])
    # System blocks, by position.
    start_a, start_b = _first(sa, "message"), _first(sb, "message")
    sys_a = [i for i in range(start_a) if sa[i].kind == "system"]
    sys_b = [j for j in range(start_b) if sb[j].kind == "system"]
    for k in range(max(len(sys_a), len(sys_b))):
        if k < len(sys_a) and k < len(sys_b):
            x, y = sa[sys_a[k]], sb[sys_b[k]]
            if x.digest != y.digest:
                yield (sys_a[k], sys_b[k], "", "", "", "", x, y)
        elif k < len(sys_a):
            x = sa[sys_a[k]]
            yield (sys_a[k], _first(sb, "message"), "content-edit", f"{x.name} left out",
                   x.path, "", x, None)
        else:
            y = sb[sys_b[k]]
            yield (_first(sa, "message"), sys_b[k], "content-edit", f"{y.name} added",
                   y.path, y.path, None, y)
    # History items, aligned by their bytes.
    for op in history_ops(sa, sb, start_a, start_b, alike=item_alike(a, b)):
        if op.kind != "change":
            cause, detail, path, path_b = history_cause(op, sa, sb, a)
            yield (op.a_index, op.b_index, cause, detail, path, path_b,
                   sa[op.a_index] if op.a_index < len(sa) else None,
                   sb[op.b_index] if op.b_index < len(sb) else None)
            continue
        i, j = op.a_index, op.b_index  # the item's first differing block
        item_a, item_b = sa[i].path, sb[j].path
        while (i < len(sa) and j < len(sb) and sa[i].digest == sb[j].digest
               and _same_item(sa[i], item_a) and _same_item(sb[j], item_b)):
            i, j = i + 1, j + 1
        left = sa[i] if i < len(sa) and _same_item(sa[i], item_a) else None
        right = sb[j] if j < len(sb) and _same_item(sb[j], item_b) else None
        if left is None or right is None:
            what = f"{(left or sa[op.a_index]).name} " + ("lost blocks" if right is None else
                                                           "got blocks")
            yield (i if left is not None else op.a_index, j, "history-rewrite", what,
                   (left or sa[op.a_index]).path, (right or sb[op.b_index]).path, left, right)
        else:
            yield (i, j, "", "", "", "", left, right)


def _same_item(segment: Segment, path: str) -> bool:
    return segment.kind == "message" and item_of(segment.path) == item_of(path)


def _cut(a: Segmented, b: Segmented, sa: Sequence[Segment], found: _Found) -> Divergence:
    """The :class:`Divergence` of one change: classified (a pair of segments in corresponding
    places, by their own bytes), offsets, snippets and costs."""
    i, j, cause, detail, path, path_b, x, y = found
    data_a, data_b = _bytes(a), _bytes(b)
    inside = 0  # a list-level change (insert, delete, move, tools) starts at its item
    if not cause and x is not None and y is not None:  # a pair changed in place
        cause, detail, path = _classify_pair(a, b, x, y, shifted=x.path != y.path)
        if path.startswith(x.path):
            path_b = y.path + path[len(x.path):]
        if x.kind == y.kind:
            inside = common_prefix_len(data_a[x.start:x.end], data_b[y.start:y.end])
    start_a = x.start if x is not None else (sa[i].start if i < len(sa) else
                                             (sa[-1].end if sa else 0))
    start_b = y.start if y is not None else (b.segments[j].start if j < len(b.segments) else
                                             len(data_b))
    offset = start_a + inside
    named = x if x is not None else (y if y is not None else None)
    end = sa[-1].end if sa else 0
    return Divergence(
        offset=offset,
        segment=named.name if named is not None else "",
        segment_kind=named.kind if named is not None else "",
        segment_index=i,
        path=path,
        cause=cause,
        detail=detail,
        snippet_a=_snippet(data_a, offset),
        snippet_b=_snippet(data_b, start_b + inside),
        path_b="" if path_b == path else path_b,
        lost_bytes=max(end - offset, 0),
        lost_tokens=tokens_after(sa, offset),
    )


def bounded_divergences(a: Segmented, b: Segmented, limit: int | None,
                        first: Divergence | None = None) -> tuple[tuple[Divergence, ...], int]:
    """``(the first limit divergences, how many there are)``: :func:`divergences` that
    classifies and cuts snippets for at most ``limit`` of them (``None``: all), and only
    counts the rest. ``first``: ``diff(a, b)`` when the caller has it already.

    Raises:
        InputError: as :func:`~stableprompt._diff.diff`.
    """
    first = diff(a, b) if first is None else first
    if first is None:
        return (), 0
    sa, sb = _cacheable(a), b.segments
    kept: list[Divergence] = [first]
    total = 1
    head = ("tool-removed", "tool-added", "tool-reorder")
    later: list[_Found] = []
    for found in _walk(a, b, sa, sb):
        i, cause = found[0], found[2]
        if cause in head:  # the tool list's change: named once, wherever it starts
            if cause == first.cause:
                continue
        elif i <= first.segment_index:  # at or before the first (diff named it)
            continue
        later.append(found)
    later.sort(key=lambda f: (f[0], not f[2]))  # at one segment: an item-level change first
    for found in later:
        total += 1
        if limit is None or len(kept) < limit:
            kept.append(_cut(a, b, sa, found))
    return tuple(kept), total


def divergences(a: Segmented, b: Segmented) -> tuple[Divergence, ...]:
    """Every divergence of a later prompt ``b`` from its predecessor ``a``, in the
    provider's cache order: ``divergences(a, b)[0] == diff(a, b)``.

    Each :class:`~stableprompt.Divergence` names its segment, its JSON pointer in the
    predecessor (``path``) and, when another, in the later request (``path_b``: after an
    insertion the same message has another index), its cause (``history-insert``,
    ``history-delete`` and ``history-move`` for history items put before an already-sent
    one, left out, or re-sent elsewhere), snippets of both sides, and what it costs once
    every earlier one is fixed: ``lost_bytes`` (segment data) and ``lost_tokens`` (when the
    segments carry token counts, as a render's do). The first costs the cache; the later
    ones are what the next fix reveals.

    Args:
        a: The earlier render/request (same lineage).
        b: The later render/request.

    Returns:
        An empty tuple when ``a``'s cacheable segments are a byte prefix of ``b``'s, else
        the divergences, first to last in the predecessor's cache order.

    Raises:
        InputError: as :func:`~stableprompt.diff` (codes ``diff-mismatch``, ``diff-type``).
    """
    _comparable(a, b)
    return bounded_divergences(a, b, None)[0]


public(divergences)
