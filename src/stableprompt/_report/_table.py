"""A rich table of many rows printed in pieces, the same bytes as printed whole (issue 30:
``stableprompt report --sessions`` lists every session, ~885,000 at 10M calls, and
``--by session`` a row per session).

``console.print(table)`` holds every cell and then every rendered segment of the table at
once. :func:`print_in_pieces` reads the rows twice from a function that makes them (the
report's sessions, read from the temporary file as they are listed) and holds
:data:`PIECE_ROWS` of them at a time: a first pass takes each column's width range as rich
does (``Table._measure_column`` of each piece: the largest minimum and the largest maximum
over every cell, which is what rich takes over all rows at once), then each piece is
rendered with those widths (``Table._render``) and its lines printed, without the title,
top edge and header of the pieces after the first and the bottom edge of those before the
last (a table without its outer edge has none). Rows are told apart by nothing but their
cells (no row styles, sections or footer), and the box's middle and last rows draw the
same, as rich's default box (``HEAVY_HEAD``) does; :func:`print_in_pieces` checks both,
and that rich still has the private methods used (:data:`_PRIVATE`), and otherwise prints
the table whole.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["PIECE_ROWS", "print_in_pieces"]

PIECE_ROWS = 2000
"""Rows held (made, measured, rendered) at a time."""

_PRIVATE = frozenset({"_measure_column", "_calculate_column_widths", "_render"})
"""rich's own ``Table`` methods the pieces rely on (not public API; present from 13.7 to
15.0): a rich without them prints the table whole."""


def print_in_pieces(console: Any, make_table: Callable[[], Any],
                    rows: Callable[[], Iterator[Sequence[str]]]) -> None:
    """``console.print`` of the table ``make_table()`` (columns and title set, no rows) with
    every row of ``rows()`` added, :data:`PIECE_ROWS` rows at a time (module docstring):
    ``rows`` is called twice and must make the same rows both times."""
    from rich.measure import Measurement
    from rich.segment import Segment, Segments
    from rich.table import Table

    table = make_table()
    box = table.box
    if (not _PRIVATE.issubset(dir(Table)) or not hasattr(table, "_extra_width")
            or table.row_styles or table.show_footer or table.show_lines or table.leading
            or table.width is not None or table.expand or table.min_width is not None
            or (box is not None and (box.mid_left, box.mid_vertical, box.mid_right)
                != (box.foot_left, box.foot_vertical, box.foot_right))):
        for row in rows():  # not a shape the pieces reproduce: whole
            table.add_row(*row)
        console.print(table)
        return

    def pieces() -> Iterator[Any]:
        made = iter(rows())
        first = True
        while True:
            chunk = list(itertools.islice(made, PIECE_ROWS))
            if not chunk and not first:
                return
            piece = make_table()
            for row in chunk:
                piece.add_row(*row)
            yield piece
            first = False
            if len(chunk) < PIECE_ROWS:
                return

    measured: dict[tuple[int, int], Any] = {}  # (max width, column) -> range over all rows

    def measure(_: Any, console: Any, options: Any, column: Any) -> Any:
        found = measured.get((options.max_width, column._index))
        if found is not None:
            return found
        # rich asks for every column at the table's width first: all in one pass over the
        # rows; then (a table too wide) for each column again at its own width: that one
        wanted = range(len(table.columns)) if not measured else (column._index,)
        ranges: dict[int, Any] = {}
        for piece in pieces():
            for i in wanted:
                m = Table._measure_column(piece, console, options, piece.columns[i])
                seen = ranges.get(i)
                ranges[i] = m if seen is None else Measurement(
                    max(seen.minimum, m.minimum), max(seen.maximum, m.maximum))
        for i, m in ranges.items():
            measured[options.max_width, i] = m
        return ranges[column._index]

    options = console.options.update(justify=None, overflow=None, height=None, no_wrap=None,
                                     markup=None, highlight=None)
    table._measure_column = measure.__get__(table)  # every row's cells, piece by piece
    widths = table._calculate_column_widths(
        console, options.update_width(options.max_width - table._extra_width))

    def lines(piece: Any) -> list[list[Any]]:
        piece._calculate_column_widths = lambda *_: widths
        return list(Segment.split_lines(console.render(piece, options)))

    head = make_table()
    head.title = None
    bottom = 1 if box is not None and table.show_edge else 0
    skip = len(lines(head)) - bottom  # top edge, header, its rule: all but the bottom edge
    previous: list[list[Any]] | None = None
    for index, piece in enumerate(pieces()):
        if index:
            piece.title = None
        out = lines(piece)
        if index:
            out = out[skip:]
        if previous is not None:  # not the last piece: its bottom edge goes
            _print_lines(console, previous[:len(previous) - bottom], Segments, Segment)
        previous = out
    if previous is not None:
        _print_lines(console, previous, Segments, Segment)


def _print_lines(console: Any, lines: list[list[Any]], segments: Any, segment: Any) -> None:
    for line in lines:
        console.print(segments([*line, segment.line()]), end="")
