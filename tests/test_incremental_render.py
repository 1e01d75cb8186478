"""Incremental rendering (issue 10): bodies assembled from the per-history memo and request
fingerprints chained from per-message segment digests equal a from-scratch render and a
from-scratch segmenting, at every turn, whatever happened to the history in between.

"From scratch" is the same rendered prompt with an empty history memo (every message grouped,
serialized and joined again), and ``segment_request(fmt, loads(content))`` for the
fingerprints. Flatness is checked by counting work, never by timing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stableprompt import Conversation, PromptBuilder, ProviderRequest, RenderedPrompt, Tool
from stableprompt._canonical import canonical_json, loads
from stableprompt._exceptions import StablePromptError
from stableprompt._wire import _parts, anthropic, openai_chat
from stableprompt._wire._formats import segment_request

TOOLS = [Tool(f"tool_{i}", f"Tool {i}.", {"type": "object", "properties": {
    "a": {"type": "string"}, "b": {"type": "integer"}}}) for i in range(3)]

Render = Callable[[RenderedPrompt], ProviderRequest]

RENDERS: dict[str, Render] = {
    "anthropic": lambda r: r.to_anthropic(model="m", max_tokens=5),
    "anthropic-1h": lambda r: r.to_anthropic(model="m", max_tokens=5, history_ttl="1h",
                                             tool_choice={"type": "auto"}),
    "anthropic-2": lambda r: r.to_anthropic(model="m2", max_tokens=5, max_breakpoints=2,
                                            temperature=0.5),
    "anthropic-system-tail": lambda r: r.to_anthropic(model="claude-opus-5", max_tokens=5),
    "chat": lambda r: r.to_openai_chat(model="gpt-5.6"),
    "chat-key": lambda r: r.to_openai_chat(model="gpt-4o", prompt_cache_key=True,
                                           system_role="developer", tool_choice="auto"),
    "chat-explicit": lambda r: r.to_openai_chat(model="gpt-5.6", prompt_cache_ttl="30m"),
    "responses": lambda r: r.to_openai_responses(model="gpt-5.6"),
    "responses-explicit": lambda r: r.to_openai_responses(
        model="gpt-5.6", prompt_cache_ttl="12h", history_ttl="30m", prompt_cache_mode="explicit"),
    "responses-key": lambda r: r.to_openai_responses(
        model="gpt-4o", prompt_cache_key="k", system_role="system", tail_role="user",
        reasoning={"effort": "low"}),
}


def _head(*, system: bool = True, user_ttl: str | None = None) -> Any:
    builder = PromptBuilder(tokenizer=None)
    if system:
        builder = builder.system("Be brief.", cache_ttl=user_ttl).system("Use metric units.")
    return builder.tools(TOOLS).tail_slot("now", required=False).freeze(
        head_ttl="1h" if user_ttl else "5m")


def _turn(conv: Conversation, i: int, *, breakpoint: str | None = None) -> None:
    conv.user([f"question {i}", "more"] if i % 4 == 1 else f"question {i}",
              cache_breakpoint=breakpoint)
    calls = [{"id": f"c{i}-{k}", "name": "tool_1", "arguments": {"a": "x", "b": i}}
             for k in range(i % 3)]
    conv.assistant(f"answer {i}" if i % 2 or not calls else None, tool_calls=calls)
    for call in calls:
        conv.tool_result(str(call["id"]), {"n": i} if i % 5 else "plain")


def check(rendered: RenderedPrompt, render: Render) -> ProviderRequest | None:
    """``render(rendered)`` equals the from-scratch render (or fails the same way), and its
    fingerprints equal the segmented body's."""
    scratch = dataclasses.replace(rendered, history_memo={})
    try:
        expected = render(scratch)
    except StablePromptError as exc:
        with pytest.raises(type(exc)) as caught:
            render(rendered)
        assert str(caught.value) == str(exc)
        return None
    request = render(rendered)
    assert request.content == expected.content
    # canonical JSON throughout: every key in sorted order (a spliced marker included)
    assert request.content == canonical_json(loads(request.content))
    segmented = segment_request(request.wire_format, loads(request.content))
    assert request.fingerprint == segmented.fingerprint == expected.fingerprint
    assert request.head_fingerprint == segmented.head_fingerprint
    assert request.segments == segmented.segments
    return request


def check_all(rendered: RenderedPrompt) -> None:
    for render in RENDERS.values():
        check(rendered, render)


@pytest.mark.parametrize("system", [True, False])
def test_every_turn_equals_a_from_scratch_render(system: bool) -> None:
    conv = _head(system=system).conversation()
    for i in range(40):
        _turn(conv, i)
        check_all(conv.render(tail={"now": str(i)} if i % 3 else None))


def test_carry_breakpoints_beyond_the_lookback() -> None:
    conv = _head().conversation()
    for i in range(6):
        _turn(conv, i)
        check_all(conv.render(tail={"now": "a"}))
    for burst in range(4):  # >= 20 blocks between renders: the carry breakpoint is placed
        for i in range(10):
            _turn(conv, 100 * (burst + 1) + i)
        rendered = conv.render(tail={"now": str(burst)})
        request = check(rendered, RENDERS["anthropic"])
        assert request is not None
        carry = rendered.previous_breakpoint
        assert carry is not None
        marked = [s.path for s in request.segments if s.breakpoint and s.kind == "message"]
        assert len(marked) == 2  # the carry and the end of history
        check_all(rendered)
        check_all(conv.render(tail={"now": "again"}))  # same history: carry unchanged


def test_user_breakpoints_budget_and_ttl_order() -> None:
    conv = _head(user_ttl="1h").conversation()
    for i in range(30):
        _turn(conv, i, breakpoint="5m" if i in (3, 11, 19, 25) else None)
        check_all(conv.render(tail={"now": str(i)}))  # over budget from turn 25: same error
    conv = _head().conversation()
    for i in range(12):
        _turn(conv, i, breakpoint="1h" if i == 9 else None)
        check_all(conv.render())  # 1h after the 5m head breakpoint: ttl-order error


def test_compaction_fork_and_rebase() -> None:
    conv = _head().conversation()
    for i in range(20):
        _turn(conv, i)
        conv.render(tail={"now": str(i)}).to_anthropic(model="m", max_tokens=5).fingerprint  # noqa: B018
        check_all(conv.render())
    branch = conv.fork()
    for i in range(20, 26):
        _turn(conv, i)
        _turn(branch, 1000 + i)
        check_all(conv.render(tail={"now": "main"}))
        check_all(branch.render(tail={"now": "branch"}))
    count = len(conv.messages)
    for start in (count - 3, count // 2, 0):
        while True:
            try:
                conv.compact("summary", start=start)
                break
            except StablePromptError:
                start -= 1
        check_all(conv.render(tail={"now": "after"}))
        for i in range(3):
            _turn(conv, 2000 + 10 * start + i)
            check_all(conv.render(tail={"now": str(i)}))
    check_all(branch.render(tail={"now": "branch"}))
    other, _ = branch.rebase(_head(user_ttl="1h"))
    check_all(other.render(tail={"now": "rebased"}))
    old = branch.render()
    before = {name: _outcome(render, old) for name, render in RENDERS.items()}
    _turn(branch, 5000)
    check_all(branch.render())
    check_all(old)  # an older rendered prompt of the same history: memo entry rejected
    # it reads the conversation's list without a copy: the messages appended since are not its
    assert {name: _outcome(render, old) for name, render in RENDERS.items()} == before
    assert len(old.messages) == old.message_count < len(branch.messages)


def _outcome(render: Render, rendered: RenderedPrompt) -> bytes | str:
    try:
        return render(rendered).content
    except StablePromptError as exc:
        return str(exc)


def test_a_stale_entry_is_dropped_by_digest_not_identity() -> None:
    conv = _head().conversation()
    for i in range(5):
        _turn(conv, i)
    first = conv.render()
    check_all(first)
    memo = first.history_memo
    assert any(key.startswith("anthropic-body") for key in memo)
    conv.compact("summary", start=2)
    for i in range(5, 8):
        _turn(conv, i)
    later = conv.render()
    assert later.history_memo is memo  # same memo, entries now describe another history
    check_all(later)


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls = [0]
    original = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("name", ["anthropic", "chat", "responses"])
def test_work_per_turn_is_flat_in_history_length(name: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Serializing, grouping and chaining per turn do not grow with the history."""
    render = RENDERS[name]
    conv = _head().conversation()
    chained = _counting(monkeypatch, _parts, "chain")
    blocks = _counting(monkeypatch, anthropic, "_role")
    joined = _counting(monkeypatch, openai_chat, "message_bytes")
    costs = []
    for i in range(120):
        _turn(conv, 60 * i + 7)  # the same shape of turn every time
        before = chained[0], blocks[0], joined[0]
        request = render(conv.render(tail={"now": str(i)}))
        request.content  # noqa: B018
        request.fingerprint  # noqa: B018
        costs.append((chained[0] - before[0], blocks[0] - before[1], joined[0] - before[2]))
    assert costs[119] == costs[10]
    assert costs[10][0] < 12


ops = st.lists(st.one_of(
    st.tuples(st.just("user"), st.integers(1, 3), st.sampled_from([None, None, None, "5m"])),
    st.tuples(st.just("assistant"), st.booleans(), st.integers(0, 2)),
    st.tuples(st.just("compact"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("fork"), st.just(0), st.just(0)),
    st.tuples(st.just("render"), st.sampled_from(sorted(RENDERS)), st.integers(0, 3)),
    st.tuples(st.just("burst"), st.integers(7, 12), st.just(0)),
), max_size=40)


@given(ops=ops, system=st.booleans())
def test_random_append_compact_fork_sequences(ops: list[tuple[Any, Any, Any]],
                                              system: bool) -> None:
    convs = [_head(system=system).conversation()]
    for n, (kind, a, b) in enumerate(ops, 1):
        conv = convs[n % len(convs)]
        try:
            if kind == "user":
                conv.user([f"u{n}"] * a, cache_breakpoint=b)
            elif kind == "assistant":
                calls = [{"id": f"c{n}-{k}", "name": "tool_2", "arguments": {"a": "z"}}
                         for k in range(b)]
                conv.assistant(f"a{n}" if a or not calls else None, tool_calls=calls)
                for call in calls:
                    conv.tool_result(str(call["id"]), "r")
            elif kind == "compact" and conv.messages:
                conv.compact("s", start=int(a * (len(conv.messages) - 1)))
            elif kind == "fork":
                convs.append(conv.fork())
            elif kind == "burst":
                for i in range(a):
                    _turn(conv, 10_000 + 100 * n + i)
            elif kind == "render":
                rendered = conv.render(tail={"now": str(b)} if b else None)
                check(rendered, RENDERS[a])
                check(rendered, RENDERS["anthropic"])
        except StablePromptError:
            pass
    for conv in convs:
        with contextlib.suppress(StablePromptError):
            check_all(conv.render(tail={"now": "end"}))


def test_compaction_at_the_memo_boundary_merges_role_groups() -> None:
    """The memo's prefix ends at a role-group boundary; a compaction starting right there puts
    a user summary after a user message, so the groups merge and the prefix is not reusable."""
    conv = _head().conversation()
    for i in range(6):
        conv.user(f"q{i}")
        conv.assistant(f"a{i}")
        check_all(conv.render())
    rendered = conv.render()
    done = rendered.history_memo["anthropic-body"][0]
    assert done > 0 and conv.messages[done].role == "assistant"
    assert conv.messages[done - 1].role == "user"
    conv.compact("summary", start=done)
    conv.assistant("after")
    conv.user("next")
    conv.assistant("again")
    check_all(conv.render(tail={"now": "x"}))


def test_concurrent_renders_of_one_conversation() -> None:
    conv = _head().conversation()
    for i in range(30):
        _turn(conv, i)
    rendered = [conv.render(tail={"now": str(k)}) for k in range(4)]
    expected = [RENDERS["chat"](dataclasses.replace(r, history_memo={})).content
                for r in rendered]
    results: list[bool] = []

    def work(k: int) -> None:
        for _ in range(50):
            results.append(RENDERS["chat"](rendered[k % 4]).content == expected[k % 4])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results and all(results)


def test_a_rendered_request_pickles_without_its_fingerprint_closure() -> None:
    conv = _head().conversation()
    _turn(conv, 1)
    request = RENDERS["anthropic"](conv.render())
    fingerprint = request.fingerprint
    copy = pickle.loads(pickle.dumps(request))
    assert copy == request
    assert copy.fingerprint == fingerprint
    assert copy.head_fingerprint == request.head_fingerprint


def test_a_carried_breakpoint_re_renders_one_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a long burst the carry is far back; every later render of that history renders
    only the carried group and the last one (the rest is the memo's prefix)."""
    conv = _head().conversation()
    _turn(conv, 1)
    check(conv.render(), RENDERS["anthropic"])
    for i in range(100):
        _turn(conv, 60 * i + 7)
    rendered = conv.render()
    groups = _counting(monkeypatch, anthropic, "_group")
    first = check(rendered, RENDERS["anthropic"])
    assert first is not None
    assert len([s for s in first.segments if s.breakpoint and s.kind == "message"]) == 2
    before = groups[0]
    RENDERS["anthropic"](conv.render()).content  # noqa: B018
    assert groups[0] - before == 2


@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_a_marked_block_is_its_stored_bytes_with_the_marker_in_sorted_place(ttl: str) -> None:
    conv = _head().conversation()
    conv.user("question")
    conv.assistant("let me look", tool_calls=[{"id": "c1", "name": "tool_1",
                                               "arguments": {"b": 2, "a": "x"}}])
    conv.tool_result("c1", {"rows": [1, 2]}, is_error=True)
    conv.user(["two", "texts"])
    for message in conv.messages:
        for index, canonical in enumerate(message.wire_blocks):
            reference = anthropic.block(canonical)
            reference[anthropic.MARKER_KEY] = anthropic.cache_control(ttl)
            assert anthropic.block_with_breakpoint(message, index, ttl) == canonical_json(
                reference)
