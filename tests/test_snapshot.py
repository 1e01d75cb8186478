"""Snapshot: the O(1) read-only view a render holds of the conversation's append-only lists,
and the shared list plus own tail of the recorder's segmented requests (``first``, ``then``)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stableprompt import PromptBuilder
from stableprompt._diff import first_divergent_index
from stableprompt._segment import Segment, Snapshot, build_segments, new_spec

parts = st.lists(st.lists(st.integers(), max_size=5), max_size=4)


@given(parts, st.integers(-12, 12), st.integers(-12, 12), st.sampled_from([None, 1, 2, -1]))
def test_reads_like_the_tuple_of_its_parts(lists: list[list[int]], i: int, j: int,
                                           step: int | None) -> None:
    """Length, items, negative indexes, slices (any step), iteration, reversal, equality and
    ``as_list`` are those of the concatenated tuple; ``first_part`` is its first part's."""
    view = Snapshot(*((seq, len(seq)) for seq in lists))
    expected = tuple(x for seq in lists for x in seq)
    assert len(view) == len(expected)
    assert tuple(view) == expected and list(reversed(view)) == list(reversed(expected))
    assert view == expected and expected == view and view == list(expected)
    assert view.as_list() == list(expected) and view.as_list() is not view.as_list()
    first, count = view.first_part()
    assert tuple(first[:count]) == expected[:count] and (count > 0) == bool(expected)
    assert view[i:j:step] == expected[i:j:step]
    assert isinstance(view[i:j], tuple)
    if -len(expected) <= i < len(expected):
        assert view[i] == expected[i]
    else:
        with pytest.raises(IndexError):
            view[i]
    # what a tuple also does (reviewer's findings): hashing, concatenation, integer-likes
    assert hash(view) == hash(expected)
    assert view + (7,) == (*expected, 7) and (7,) + view == (7, *expected)  # noqa: RUF005
    assert view + view == expected + expected
    if expected:
        assert view[_IntLike(0)] == expected[0] and view[False] == expected[0]
    with pytest.raises(TypeError):
        view["0"]  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        view + [1]  # noqa: RUF005


class _IntLike:
    """An index that is no int but converts like one (numpy's integers)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_later_appends_are_invisible() -> None:
    """Items appended after the snapshot (the conversation's next turns) are not in it."""
    items = [1, 2]
    view = Snapshot((items, len(items)), ((3,), 1))
    items.append(99)
    assert tuple(view) == (1, 2, 3) and view[2] == 3 and len(view) == 3 and view[-1] == 3
    assert pickle.loads(pickle.dumps(view)) == (1, 2, 3)
    with pytest.raises(TypeError):
        view["x"]  # type: ignore[call-overload]
    assert hash(view) == hash((1, 2, 3))  # immutable: hashed as the tuple it equals


def test_a_render_keeps_its_history_when_the_conversation_grows() -> None:
    """A RenderedPrompt made at turn 1 still shows turn 1 after more turns (its messages
    and segments are snapshots, not copies)."""
    conv = PromptBuilder(tokenizer=None).system("s").freeze().conversation()
    conv.user("one")
    first = conv.render()
    before = (tuple(first.messages), tuple(first.segments), first.fingerprint)
    conv.assistant("two")
    conv.user("three")
    assert (tuple(first.messages), tuple(first.segments), first.fingerprint) == before
    assert len(conv.render().messages) == 3
    assert first.to_anthropic(model="claude-sonnet-4-5", max_tokens=8).content.count(
        b'"role"') == 1


def test_a_part_growing_while_it_is_iterated_is_read_to_its_length() -> None:
    """Iterating a snapshot while its conversation appends (another thread) yields exactly
    its items: each part is read up to its length, whatever the list holds by then."""
    items = [1, 2]
    view = Snapshot((items, 2))
    seen = []
    for item in view:
        seen.append(item)
        items.extend([7, 8])
        if len(seen) > 5:  # the list outgrows any reader that follows it
            break
    assert seen == [1, 2] and list(view) == [1, 2]


def _lists(view: Snapshot[Any]) -> list[Any]:
    """The sequences ``view`` reads, in order (its parts)."""
    return [seq for seq, _ in view._parts]


def test_then_shares_one_list_along_a_conversation() -> None:
    """Each ``first(n).then(tail)`` of the latest snapshot (a request reusing its
    predecessor's leading items) appends the reused items to the one shared list, holds its
    own tail as given, and leaves every earlier snapshot as it was."""
    head = ("h0", "h1")
    made = [Snapshot((head, 2)).then(("a", "b", "c"))]
    model = [("h0", "h1", "a", "b", "c")]
    shared = _lists(made[0])[0]
    for turn in range(5):
        reused = len(model[-1]) - 1  # the last item is redone (a moved breakpoint)
        tail = (f"x{turn}", f"y{turn}", f"z{turn}")
        view = made[-1].first(reused).then(tail)
        assert _lists(view)[0] is shared and _lists(view)[1] is tail
        made.append(view)
        model.append(model[-1][:reused] + tail)
        assert [tuple(v) for v in made] == model and made == model
    assert len(shared) == len(model[-1]) - 3  # the shared items, once


def test_then_copies_on_a_fork() -> None:
    """A snapshot whose items differ from what another one already appended to the shared
    list (a fork) gets a new list; one that agrees with what is there shares it, appending
    what the list lacks; a list ``then`` did not make (the conversation's own) is never
    appended to."""
    base = Snapshot((("h",), 1)).then(("1", "2", "3"))
    shared = _lists(base)[0]
    a = base.first(3).then(("a",))  # appends 1, 2
    fork = Snapshot((shared, 1), (("9", "9", "9"), 3)).then(("b",))  # other items after h
    again = base.first(2).then(("c",))  # shares: the list holds 1 there
    longer = base.first(4).then(("d",))  # the list holds 1, 2: 3 is appended
    assert ["".join(v) for v in (a, fork, again, longer)] == ["h12a", "h999b", "h1c", "h123d"]
    assert _lists(a)[0] is shared and _lists(again)[0] is shared
    assert _lists(fork)[0] is not shared and _lists(longer)[0] is shared
    assert shared == ["h", "1", "2", "3"]
    assert "".join(base) == "h123" and "".join(a) == "h12a"
    own = [1, 2]
    view = Snapshot((own, 2)).then((3,))
    assert own == [1, 2] and tuple(view.first(2).then((4,))) == (1, 2, 4) and own == [1, 2]
    assert pickle.loads(pickle.dumps(view)) == (1, 2, 3) and type(pickle.loads(
        pickle.dumps(view))) is tuple


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30),
                          st.lists(st.integers(), max_size=4)), max_size=25))
def test_then_reads_like_tuples(steps: list[tuple[int, int, list[int]]]) -> None:
    """Any sequence of ``first(n).then(tail)`` from any earlier snapshot (forks, shorter
    and longer reuse) gives the tuple ``model[:n] + tail``, and no snapshot changes later."""
    made: list[Snapshot[int]] = [Snapshot(((0, 1), 2)).then((2,))]
    model: list[tuple[int, ...]] = [(0, 1, 2)]
    for pick, count, tail in steps:
        source = pick % len(made)
        n = min(count, len(model[source]))
        made.append(made[source].first(n).then(tuple(tail)))
        model.append(model[source][:n] + tuple(tail))
        assert [tuple(v) for v in made] == model
        assert all(v[i] == m[i] for v, m in zip(made, model, strict=True)
                   for i in range(-len(m), len(m)))


def _chain(texts: list[str], after: tuple[Segment, ...] = ()) -> tuple[Segment, ...]:
    """Message segments of ``texts`` chained after ``after`` (a conversation's prefix)."""
    last = after[-1] if after else None
    made, _, _ = build_segments(
        [new_spec("message", f"m{i}", text.encode(), "", None, "user")
         for i, text in enumerate(texts)],
        start=last.end if last else 0,
        previous=bytes.fromhex(last.prefix_digest) if last else None)
    return (*after, *made)


@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=12),
       st.lists(st.sampled_from("abc"), max_size=6), st.integers(0, 12), st.integers(0, 12),
       st.lists(st.sampled_from("abc"), min_size=1, max_size=12), st.integers(0, 12))
def test_first_divergent_index_of_snapshots(texts: list[str], more: list[str], keep: int,
                                            reuse: int, others: list[str], split: int) -> None:
    """Two requests of one conversation (the later reusing some of the earlier's segments,
    its own new ones chained after), or of two conversations (two lists), diverge where
    their tuples do: the segments both read from the shared list are skipped, and the
    first parts searched directly, never misread (``Snapshot.shared_prefix``,
    ``first_part``)."""
    earlier = _chain(texts)
    keep = min(keep, len(earlier))
    a = Snapshot((earlier[:1], 1)).then(earlier[1:])
    b = a.first(keep).then(_chain(more, earlier[:keep])[keep:])
    c = a.first(min(reuse, len(a))).then(())
    other = _chain(others)
    split = min(split, len(other))
    d = Snapshot((list(other[:split]), split), (other[split:], len(other) - split))
    for x, y in ((a, b), (b, a), (b, c), (c, b), (a, c), (a, d), (d, b), (d, c)):
        assert x.shared_prefix(y) <= min(len(x), len(y))
        expected = first_divergent_index(tuple(x), tuple(y))
        assert first_divergent_index(x, y) == expected
        assert first_divergent_index(tuple(x), y) == first_divergent_index(x, tuple(y)) == \
            expected
    assert a.shared_prefix(tuple(a)) == 0
