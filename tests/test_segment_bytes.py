"""``SegmentBytes``: shared pieces behave exactly like the joined ``bytes``."""

from __future__ import annotations

import itertools
import pickle

from hypothesis import given
from hypothesis import strategies as st

from stableprompt._segment import SegmentBytes

_pieces = st.lists(st.binary(max_size=40), max_size=12)


@given(pieces=_pieces, a=st.integers(-60, 500), b=st.integers(-60, 500))
def test_slices_spans_and_len_equal_the_joined_bytes(pieces: list[bytes], a: int, b: int) -> None:
    whole = b"".join(pieces)
    data = SegmentBytes.joined(pieces)
    assert len(data) == len(whole)
    assert bytes(data) == whole and data == whole
    assert data[a:b] == whole[a:b]
    assert data[a:] == whole[a:] and data[:b] == whole[:b]
    if 0 <= a <= b:
        assert bytes(data.span(a, b)) == whole[a:b]


@given(pieces=_pieces, needle=st.binary(min_size=1, max_size=6), a=st.integers(0, 300),
       b=st.integers(0, 300))
def test_find_and_in_see_needles_across_piece_boundaries(pieces: list[bytes], needle: bytes,
                                                          a: int, b: int) -> None:
    whole = b"".join(pieces)
    data = SegmentBytes(pieces)  # unmerged: as many boundaries as pieces
    assert data.find(needle) == whole.find(needle)
    assert data.find(needle, a, b) == whole.find(needle, a, b)
    assert (needle in data) == (needle in whole)


@given(parts=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=40))
def test_appending_keeps_few_pieces_and_shares_the_old_ones(parts: list[bytes]) -> None:
    data = SegmentBytes()
    for part in parts:
        before = data.pieces()
        data = SegmentBytes.joined([data, part])
        # Each piece is at least twice the next one: a binary counter's worth of pieces.
        sizes = [len(p) for p in data.pieces()]
        assert all(x >= 2 * y for x, y in itertools.pairwise(sizes))
        # Pieces not merged with the new one are the same objects (shared, not copied).
        kept = len(data.pieces()) - 1
        assert all(p is q for p, q in zip(data.pieces()[:kept], before[:kept], strict=True))
    assert bytes(data) == b"".join(parts)


def test_a_span_shares_the_pieces_inside_it_and_pickles_as_its_bytes() -> None:
    big, mid, small = b"a" * 1000, b"b" * 400, b"c" * 100
    data = SegmentBytes((big, mid, small))
    inner = data.span(500, 1450)
    assert inner.pieces()[1] is mid
    assert bytes(inner) == (big + mid + small)[500:1450]
    assert pickle.loads(pickle.dumps(inner)) == inner
    assert data.span(0, len(data)) is data
    assert len(data.span(7, 7)) == 0
