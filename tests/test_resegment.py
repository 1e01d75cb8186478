"""Segmenting with the lineage's previous request reused (``_wire._resegment``), from a
decoded body (transport path) or from the bytes stableprompt rendered (client path, new items
decoded only), equals a from-scratch ``segment_request``, and a recorder that reuses writes
the same ledger rows as one that never does, on random conversations: appends, edits of
earlier items, reordered keys, moved breakpoint markers, truncations, other conversations on
the same head, head changes."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt import Recorder
from stableprompt._canonical import loads, wire_json
from stableprompt._wire._formats import segment_request
from stableprompt._wire._resegment import (
    LineageSegments,
    breakpoint_indices,
    common_prefix_bytes,
)

PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions",
         "openai-responses": "/v1/responses"}
TOOLS = [{"name": f"t{i}", "description": "d", "input_schema": {"type": "object"}}
         for i in range(3)]
MARK = {"anthropic": "cache_control", "openai-chat": "prompt_cache_breakpoint",
        "openai-responses": "prompt_cache_breakpoint"}

texts = st.text(alphabet="ab \u00e9\"\\", max_size=6)


def _item(wire: str, kind: int, text: str, marked: bool, flip: bool) -> Any:
    """One history item of ``wire`` (``kind`` picks user / assistant / tool / system)."""
    mark = {MARK[wire]: {"type": "ephemeral"}} if marked else {}
    if wire == "anthropic":
        role = "assistant" if kind == 1 else "user"
        block: dict[str, Any] = {"type": "text", "text": text, **mark}
        if kind == 2:
            block = {"type": "tool_result", "tool_use_id": "c", "content": text, **mark}
        item: dict[str, Any] = {"role": role, "content": [block, {"type": "text", "text": "x"}]
                                if kind == 3 else [block]}
    elif wire == "openai-chat":
        role = ("user", "assistant", "tool", "system")[kind]
        item = {"role": role, "content": [{"type": "text", "text": text, **mark}]
                if marked else text}
        if kind == 2:
            item["tool_call_id"] = "c"
    else:
        item = ({"type": "function_call_output", "call_id": "c", "output": text} if kind == 2
                else {"role": ("user", "assistant", "tool", "developer")[kind],
                      "content": [{"type": "input_text", "text": text, **mark}]})
    if flip:  # the same item with its keys in another order (other bytes on the wire)
        item = dict(reversed(list(item.items())))
    return item


items = st.tuples(st.integers(0, 3), texts, st.booleans(), st.booleans())
steps = st.lists(st.tuples(st.sampled_from(["append", "edit", "truncate", "other", "head"]),
                           st.lists(items, min_size=0, max_size=3), st.integers(0, 50)),
                 min_size=1, max_size=8)


def _body(wire: str, history: list[Any], tools: int) -> dict[str, Any]:
    key = "input" if wire == "openai-responses" else "messages"
    body: dict[str, Any] = {"model": "m", key: history}
    if tools:
        body["tools"] = TOOLS[:tools]
    if wire == "anthropic":
        body["system"] = [{"type": "text", "text": "s"}]
    decoded: dict[str, Any] = loads(wire_json(body))  # as a transport decodes it
    return decoded


def _bodies(wire: str, plan: list[tuple[str, list[Any], int]]) -> list[dict[str, Any]]:
    history: list[Any] = []
    tools = 3
    out = []
    for action, new, where in plan:
        fresh = [_item(wire, *spec) for spec in new]
        if action == "edit" and history:
            history[where % len(history)] = fresh[0] if fresh else _item(wire, 0, "e", False,
                                                                         True)
        elif action == "truncate" and history:
            history = history[: where % len(history)]
        elif action == "other":
            history = fresh or [_item(wire, 0, "o", False, False)]
            fresh = []
        elif action == "head":
            tools = where % 4
        history = [*copy.deepcopy(history), *fresh]
        out.append(_body(wire, history, tools))
    return out


def _same(found: Any, wire: str, body: dict[str, Any]) -> None:
    slow = segment_request(wire, body)
    assert found.segmented.segments == slow.segments
    assert found.segmented.data == slow.data
    assert found.segmented.fingerprint == slow.fingerprint
    assert found.segmented.head_fingerprint == slow.head_fingerprint
    assert breakpoint_indices(found.segmented) == [
        i for i, s in enumerate(slow.segments) if s.breakpoint]
    # the body, keys in order included (a rebuilt body serializes to the same bytes)
    assert wire_json(found.segmented.body) == wire_json(body)


@settings(max_examples=60, deadline=None)
@given(wire=st.sampled_from(sorted(PATHS)), plan=steps)
def test_reused_segments_equal_segment_request(wire: str, plan: Any) -> None:
    """Every request's reused segmenting equals the from-scratch one, segment for segment."""
    lineages = LineageSegments()
    for body in _bodies(wire, plan):
        _same(lineages.segment(wire, body), wire, body)


@settings(max_examples=60, deadline=None)
@given(wire=st.sampled_from(sorted(PATHS)), plan=steps)
def test_rendered_segments_equal_segment_request(wire: str, plan: Any) -> None:
    """Bodies segmented from their bytes (new items decoded only) equal the from-scratch
    segmenting, and their rebuilt body equals the decoded one."""
    lineages = LineageSegments()
    for body in _bodies(wire, plan):
        content = wire_json(body)
        found = lineages.segment_rendered(wire, content)
        if found is None:
            found = lineages.segment(wire, loads(content), content=content)
        _same(found, wire, body)


def test_rendered_path_decodes_only_new_items() -> None:
    """A rendered turn that appends is segmented from its bytes, reusing every earlier
    segment; a turn whose head changed is not (it is decoded)."""
    lineages = LineageSegments()
    history = [_item("openai-chat", i % 4, f"m{i}", False, False) for i in range(5)]
    first = wire_json(_body("openai-chat", history, 3))
    lineages.segment("openai-chat", loads(first), content=first)
    grown = wire_json(_body("openai-chat", [*history, history[0]], 3))
    found = lineages.segment_rendered("openai-chat", grown)
    assert found is not None and found.reused > 0
    assert lineages.segment_rendered("openai-chat",
                                     wire_json(_body("openai-chat", history, 2))) is None


def _response(wire: str, turn: int) -> bytes:
    if wire == "anthropic":
        usage: dict[str, Any] = {"input_tokens": 5, "cache_read_input_tokens": 10 * turn,
                                 "cache_creation_input_tokens": 7, "output_tokens": 3}
        return wire_json({"id": f"msg_{turn}", "usage": usage})
    if wire == "openai-chat":
        return wire_json({"id": f"c{turn}", "usage": {
            "prompt_tokens": 40 + turn, "completion_tokens": 2,
            "prompt_tokens_details": {"cached_tokens": 10 * turn}}})
    return wire_json({"id": f"r{turn}", "usage": {
        "input_tokens": 40 + turn, "output_tokens": 2,
        "input_tokens_details": {"cached_tokens": 10 * turn}}})


def _rows(recorder: Recorder, wire: str, bodies: list[dict[str, Any]], *,
          client: bool = False) -> list[dict[str, Any]]:
    clock = iter(range(1_000, 10_000, 7))
    recorder.clock = lambda: float(next(clock))
    for turn, body in enumerate(bodies):
        content = wire_json(body)
        found = recorder.segment_rendered(wire, content) if client else None
        decoded = (found.segmented.body if found is not None else loads(content)) if client \
            else None
        pending = recorder.start(PATHS[wire], {}, content, host="api.example.test",
                                 decoded=decoded, resegmented=found)
        assert pending is not None
        recorder.finish(pending, status_code=200, body=_response(wire, turn), latency_ms=1.0)
    return [r.model_dump(exclude={"record_id", "predecessor_id"}) for r in recorder.records]


@settings(max_examples=25, deadline=None)
@given(wire=st.sampled_from(sorted(PATHS)), plan=steps)
def test_recorder_rows_equal_without_reuse(wire: str, plan: Any) -> None:
    """A recorder reusing segments and token counts writes the rows one without reuse writes
    (record ids aside, which are random)."""
    bodies = _bodies(wire, plan)
    fast, client, slow = (Recorder(tokenizer="bytes/4") for _ in range(3))
    slow._segments = LineageSegments(max_lineages=0)
    expected = _rows(slow, wire, bodies)
    assert _rows(fast, wire, bodies) == expected
    assert _rows(client, wire, bodies, client=True) == expected


@given(a=st.binary(max_size=300), b=st.binary(max_size=300), shared=st.binary(max_size=300))
def test_common_prefix_bytes(a: bytes, b: bytes, shared: bytes) -> None:
    """The common prefix length is the longest ``n`` with ``x[:n] == y[:n]``."""
    x, y = shared + a, shared + b
    n = common_prefix_bytes(x, y)
    assert x[:n] == y[:n]
    assert n == min(len(x), len(y)) or x[n] != y[n]


def test_appended_history_reuses_all_earlier_items() -> None:
    """A request that only appends reuses every segment of the previous one (the last item
    too: only the byte after it changed), and its token counts come along."""
    lineages = LineageSegments()
    history = [_item("anthropic", i % 3, f"m{i}", False, False) for i in range(6)]
    first = lineages.segment("anthropic", _body("anthropic", history, 3))
    assert first.reused == 0
    lineages.remember_tokens(first.segmented, [1] * len(first.segmented.segments))
    second = lineages.segment("anthropic", _body("anthropic", [*history, history[0]], 3))
    assert second.reused == len(first.segmented.segments)
    assert second.previous_tokens == (1,) * len(first.segmented.segments)


def test_client_never_decodes_a_rendered_turn() -> None:
    """Through AnthropicClient, a later turn of a conversation (from the third on: the second
    unmarks the first message, which the previous request sent with the end-of-history
    breakpoint) is recorded without its ``ProviderRequest.body`` ever being decoded, and its
    rows equal the transport path's."""
    from stableprompt import AnthropicClient, PromptBuilder, Tool

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_response("anthropic", 1))

    head = (PromptBuilder(tokenizer=None).system("Be brief.")
            .tools([Tool("t", "A tool.", {"type": "object"})]).freeze())
    conv = head.conversation()
    def clock() -> Any:  # the same clock readings for both recorders
        ticks = iter(range(1_000, 100_000, 3))
        return lambda: float(next(ticks))

    client = AnthropicClient("k", base_url="http://provider.test",
                             transport=httpx.MockTransport(answer),
                             recorder=Recorder(tokenizer="bytes/4", clock=clock()))
    plain = Recorder(tokenizer="bytes/4", clock=clock())
    sent = []
    for i in range(6):
        conv.user(f"question {i}")
        request = conv.render().to_anthropic(model="m", max_tokens=5)
        client.send(request)
        sent.append(request)
        pending = plain.start("/v1/messages", {}, request.content, host="provider.test")
        assert pending is not None
        plain.finish(pending, status_code=200, body=_response("anthropic", 1))
        conv.assistant(f"answer {i}")
    assert ["body" in r.__dict__ for r in sent] == [True, True] + [False] * 4
    drop = {"record_id", "predecessor_id", "ts_utc", "latency_ms"}
    assert [r.model_dump(exclude=drop) for r in client.recorder.records] == \
        [r.model_dump(exclude=drop) for r in plain.records]


def test_changed_head_keeps_the_history_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request whose head changed (fewer tools) but whose history continues a stored
    conversation's segments only its new item: the shared items' segments are moved after
    the new head and chained again, and equal a from-scratch segmenting."""
    from stableprompt._wire._segmenter import SegmentBuilder

    calls: list[str] = []
    original = SegmentBuilder.content

    def counted(self: SegmentBuilder, *args: Any) -> None:
        calls.append(args[1])
        original(self, *args)

    lineages = LineageSegments()
    for wire in sorted(PATHS):
        history = [_item(wire, i % 3, f"m{i}", i == 2, False) for i in range(5)]
        lineages.segment(wire, _body(wire, history, 3))
        calls.clear()
        monkeypatch.setattr(SegmentBuilder, "content", counted)
        body = _body(wire, [*history, _item(wire, 0, "new", False, False)], 1)
        found = lineages.segment(wire, body)
        monkeypatch.undo()
        _same(found, wire, body)
        key = "input" if wire == "openai-responses" else "messages"
        assert found.reused == 0 and calls == [f"{key}[5]"]
