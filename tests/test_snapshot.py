"""Snapshot: the O(1) read-only view a render holds of the conversation's append-only lists."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stableprompt import PromptBuilder
from stableprompt._prompt._snapshot import Snapshot

parts = st.lists(st.lists(st.integers(), max_size=5), max_size=4)


@given(parts, st.integers(-12, 12), st.integers(-12, 12), st.sampled_from([None, 1, 2, -1]))
def test_reads_like_the_tuple_of_its_parts(lists: list[list[int]], i: int, j: int,
                                           step: int | None) -> None:
    """Length, items, negative indexes, slices (any step), iteration, reversal and equality
    are those of the concatenated tuple."""
    view = Snapshot(*((seq, len(seq)) for seq in lists))
    expected = tuple(x for seq in lists for x in seq)
    assert len(view) == len(expected)
    assert tuple(view) == expected and list(reversed(view)) == list(reversed(expected))
    assert view == expected and expected == view and view == list(expected)
    assert view[i:j:step] == expected[i:j:step]
    assert isinstance(view[i:j], tuple)
    if -len(expected) <= i < len(expected):
        assert view[i] == expected[i]
    else:
        with pytest.raises(IndexError):
            view[i]


def test_later_appends_are_invisible() -> None:
    """Items appended after the snapshot (the conversation's next turns) are not in it."""
    items = [1, 2]
    view = Snapshot((items, len(items)), ((3,), 1))
    items.append(99)
    assert tuple(view) == (1, 2, 3) and view[2] == 3 and len(view) == 3 and view[-1] == 3
    assert pickle.loads(pickle.dumps(view)) == (1, 2, 3)
    with pytest.raises(TypeError):
        view["x"]  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        hash(view)


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
