"""The fast segment makers equal the slow ones: ``new_segment`` is ``Segment(...)``,
``new_spec`` is ``SegmentSpec(...)``, and ``rechain`` (a history moved after another head)
is ``build_segments`` of the same segments after that head."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from stableprompt._segment import (
    KINDS,
    Segment,
    SegmentSpec,
    build_segments,
    chain,
    chain_pieces,
    new_segment,
    new_spec,
    rechain,
)

texts = st.text(max_size=8)
labels = st.one_of(st.none(), st.sampled_from(["5m", "1h", ""]))


@given(kind=st.sampled_from(KINDS), name=texts, start=st.integers(0, 1 << 40),
       size=st.integers(0, 1000), digest=texts, prefix=texts,
       tokens=st.one_of(st.none(), st.integers(0, 10**6)), path=texts, breakpoint=labels,
       label=texts)
def test_new_segment_is_the_constructor(kind: str, name: str, start: int, size: int,
                                        digest: str, prefix: str, tokens: int | None,
                                        path: str, breakpoint: str | None,
                                        label: str) -> None:
    """Same fields, equality, hash and repr as ``Segment(...)``; still frozen; and every
    field of the dataclass is one of its arguments, in order (a new field must be added)."""
    values = (kind, name, start, start + size, digest, prefix, tokens, path, breakpoint, label)
    fast, slow = new_segment(*values), Segment(*values)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert dataclasses.astuple(fast) == values
    assert [f.name for f in dataclasses.fields(Segment)] == list(
        new_segment.__code__.co_varnames[:new_segment.__code__.co_argcount])
    try:
        fast.start = 0  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:  # pragma: no cover - a failure
        raise AssertionError("new_segment made a mutable segment")


specs = st.lists(st.builds(SegmentSpec, st.sampled_from(KINDS), texts, st.binary(max_size=40),
                           texts, labels, texts), max_size=6)


@given(head=specs, other=specs, history=specs)
def test_rechain_is_build_segments_after_the_new_head(
        head: list[SegmentSpec], other: list[SegmentSpec], history: list[SegmentSpec]) -> None:
    """A history segmented after one head and moved after another by ``rechain`` equals the
    history segmented after the other head (offsets, digests, chained prefix digests)."""
    _, old_data, old_state = build_segments(other)
    moved_from, data, _ = build_segments(history, start=len(old_data), previous=old_state)
    _, new_data, new_state = build_segments(head)
    expected, _, expected_state = build_segments(history, start=len(new_data),
                                                 previous=new_state)
    moved, state = rechain(moved_from, data, base=len(old_data),
                           shift=len(new_data) - len(old_data), previous=new_state)
    assert tuple(moved) == expected and state == expected_state


@given(kind=st.sampled_from(KINDS), name=texts, data=st.binary(max_size=20), path=texts,
       breakpoint=labels, label=texts)
def test_new_spec_is_the_constructor(kind: str, name: str, data: bytes, path: str,
                                     breakpoint: str | None, label: str) -> None:
    """``new_spec`` makes the ``SegmentSpec`` its constructor makes, field for field."""
    values = (kind, name, data, path, breakpoint, label)
    fast, slow = new_spec(*values), SegmentSpec(*values)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert [f.name for f in dataclasses.fields(SegmentSpec)] == list(
        new_spec.__code__.co_varnames[:new_spec.__code__.co_argcount])


@given(st.one_of(st.none(), st.binary(min_size=32, max_size=32)),
       st.sampled_from(["tool", "system", "message", "tail", "param", "other"]),
       st.lists(st.binary(max_size=40), max_size=5))
def test_chain_pieces_equals_chain_of_the_joined_bytes(previous: bytes | None, kind: str,
                                                       pieces: list[bytes]) -> None:
    assert chain_pieces(previous, kind, pieces) == chain(previous, kind, b"".join(pieces))
