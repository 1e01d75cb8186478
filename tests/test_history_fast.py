"""``history_ops`` answers "no op" without aligning item keys when the later request re-sends
the predecessor's history segments as they are (``_history._grows_only``: a head that changes
every request, such as a clock in the system prompt, moves and re-chains them all): the same
answer as the alignment (``_history._aligned``) on random pairs of segment lists, whose later
request changes its head, re-sends, extends, edits, cuts or reorders the history."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt._diff._history import _aligned, _grows_only, history_ops
from stableprompt._segment import Segment, SegmentSpec, build_segments

# An item: a list of block contents; a history: a list of items.
_blocks = st.lists(st.sampled_from([b"x", b"y", b"zz", b"w"]), min_size=1, max_size=3)
_history = st.lists(_blocks, max_size=6)


def _segments(head: list[bytes], history: list[list[bytes]], tail: bool) -> tuple[Segment, ...]:
    specs = [SegmentSpec("system", f"system[{i}]", d, f"/system/{i}") for i, d in
             enumerate(head)]
    for i, item in enumerate(history):
        specs += [SegmentSpec("message", f"messages[{i}].content[{k}]", d,
                              f"/messages/{i}/content/{k}") for k, d in enumerate(item)]
    if tail:
        specs.append(SegmentSpec("tail", "tail", b"t"))
    return build_segments(specs)[0]


@st.composite
def _pairs(draw: st.DrawFn) -> tuple[tuple[Segment, ...], tuple[Segment, ...]]:
    head_a = draw(st.lists(st.sampled_from([b"now 1", b"now 2", b"s"]), min_size=0, max_size=3))
    head_b = draw(st.one_of(st.just(head_a), st.lists(st.sampled_from(
        [b"now 1", b"now 2", b"now 3", b"s"]), max_size=4)))
    history_a = draw(_history)
    change = draw(st.sampled_from(["grow", "same", "extend-last", "edit", "cut", "swap",
                                   "insert"]))
    history_b = [list(item) for item in history_a]
    if change == "grow":
        history_b += draw(_history)
    elif change == "extend-last" and history_b:
        history_b[-1].append(draw(st.sampled_from([b"x", b"v"])))
        history_b += draw(_history)
    elif change == "edit" and history_b:
        at = draw(st.integers(0, len(history_b) - 1))
        history_b[at] = draw(_blocks)
    elif change == "cut" and history_b:
        history_b = history_b[:draw(st.integers(0, len(history_b) - 1))]
    elif change == "swap" and len(history_b) > 1:
        history_b[0], history_b[-1] = history_b[-1], history_b[0]
    elif change == "insert":
        history_b.insert(draw(st.integers(0, len(history_b))), draw(_blocks))
    tail_a, tail_b = draw(st.booleans()), draw(st.booleans())
    return _segments(head_a, history_a, tail_a), _segments(head_b, history_b, tail_b)


def _first_message(segments: tuple[Segment, ...]) -> int:
    return next((i for i, s in enumerate(segments) if s.kind == "message"), len(segments))


@settings(max_examples=600, deadline=None)
@given(pair=_pairs(), offset_a=st.integers(0, 3), offset_b=st.integers(0, 3),
       default_b=st.booleans())
def test_fast_path_equals_the_alignment(pair: tuple[tuple[Segment, ...], tuple[Segment, ...]],
                                        offset_a: int, offset_b: int, default_b: bool) -> None:
    a, b = pair
    # an item's first segment, or inside one (the callers pass an index of ``a``, or its end)
    start = min(_first_message(a) + offset_a % 2, len(a))
    start_b = None if default_b else min(_first_message(b) + offset_b % 2, len(b))
    assert history_ops(a, b, start, start_b) == _aligned(a, b, start, start_b, None)
    if _grows_only(a, b, start, start if start_b is None else start_b):
        assert _aligned(a, b, start, start_b, None) == []


def test_fast_path_taken_after_a_changed_head() -> None:
    """The case it is for: another head (a clock), the history re-sent and grown."""
    history = [[b"x"], [b"y", b"zz"], [b"w"]]
    a = _segments([b"now 1", b"s"], history, False)
    b = _segments([b"now 2", b"s", b"s"], [*history, [b"x"]], False)
    assert a[2].digest == b[3].digest and a[2].prefix_digest != b[3].prefix_digest
    assert _grows_only(a, b, 2, 3)
    assert history_ops(a, b, 2, 3) == _aligned(a, b, 2, 3, None) == []
    # more blocks of the last item: not growth only, the alignment names it
    c = _segments([b"now 2", b"s", b"s"], [*history[:2], [b"w", b"x"]], False)
    assert not _grows_only(a, c, 2, 3)
    assert history_ops(a, c, 2, 3) == _aligned(a, c, 2, 3, None) != []
