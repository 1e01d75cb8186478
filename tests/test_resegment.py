"""Segmenting with the lineage's previous request reused (``_wire._resegment``), from a
decoded body (transport path) or from the bytes stableprompt rendered (client path, new items
decoded only), equals a from-scratch ``segment_request``, and a recorder that reuses writes
the same ledger rows as one that never does, on random conversations: appends, edits of
earlier items, reordered keys, moved breakpoint markers, truncations, other conversations on
the same head, head changes."""

from __future__ import annotations

import concurrent.futures
import copy
import gc
import hashlib
import itertools
import json
import pickle
import random
import types
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt import Recorder
from stableprompt._canonical import canonical_json, loads, wire_json
from stableprompt._recording._http import SESSION_HEADER
from stableprompt._recording._observer import Observation
from stableprompt._recording._outline import outline_base
from stableprompt._recording._predecessor import CallIndex
from stableprompt._wire._formats import segment_request
from stableprompt._wire._resegment import (
    LineageSegments,
    Resegmented,
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



def comparable(records: list[Any], drop: set[str]) -> list[dict[str, Any]]:
    """``records`` dumped without ``drop``, record ids (random) named by their row's index
    wherever they appear: the row's predecessor, a shared prefix's call in ``verdict_detail``
    and its note."""
    names = {r.record_id: f"#{i}" for i, r in enumerate(records)}
    rows = []
    for r in records:
        detail = orjson.dumps(r.verdict_detail).decode()
        for record_id, name in names.items():
            detail = detail.replace(record_id, name)
        rows.append({**r.model_dump(exclude={*drop, "verdict_detail"}),
                     "predecessor": names.get(r.predecessor_id or ""),
                     "verdict_detail": orjson.loads(detail),
                     "segment_digests": _named(r.segment_digests, names)})
    return rows


def _named(outline: str | None, names: dict[str, str]) -> str | None:
    """A delta outline's base record id (random) named by its row's index."""
    base = None if outline is None else outline_base(outline)
    return outline if outline is None or base is None else outline.replace(
        base, names.get(base, "?"), 1)

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
        recorder.finish(pending, Observation(status_code=200, body=_response(wire, turn),
                                             latency_ms=1.0))
    return comparable(recorder.records, {"record_id", "predecessor_id"})


@settings(max_examples=25, deadline=None)
@given(wire=st.sampled_from(sorted(PATHS)), plan=steps)
def test_recorder_rows_equal_without_reuse(wire: str, plan: Any) -> None:
    """A recorder reusing segments and token counts writes the rows one without reuse writes
    (record ids aside, which are random)."""
    bodies = _bodies(wire, plan)
    fast, client, slow = (Recorder(tokenizer="bytes/4") for _ in range(3))
    slow._memory.segments = LineageSegments(max_lineages=0)
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
    assert second.previous_tokens is not None
    assert tuple(second.previous_tokens) == (1,) * len(first.segmented.segments)


def test_a_lineage_holds_one_copy_of_its_history() -> None:
    """Each request parsed anew (transport path) keeps the stored request's history items
    for the ones they share, and its segment bytes share the stored pieces: a lineage of
    long conversations holds its history once, not once per request (at turn 1,000 that was
    ~5 MB retained per call)."""
    lineages = LineageSegments()
    history = [_item("anthropic", i % 3, f"m{i}", False, False) for i in range(40)]
    first = lineages.segment("anthropic", loads(canonical_json(_body("anthropic", history, 3))))
    later = [*history, history[1]]
    second = lineages.segment("anthropic", loads(canonical_json(_body("anthropic", later, 3))))
    kept, items = first.segmented.body["messages"], second.segmented.body["messages"]
    assert all(a is b for a, b in zip(kept, items[:len(kept)], strict=True))
    assert second.segmented.segment_bytes.pieces()[0] is \
        first.segmented.segment_bytes.pieces()[0]
    assert second.segmented == segment_request("anthropic", second.segmented.body)


def test_recording_never_joins_the_whole_body() -> None:
    """Recording a continuing turn reads its segments' bytes from the shared pieces: the
    joined ``SegmentedRequest.data`` (one copy of the whole body) is never made."""
    recorder = Recorder(tokenizer="cl100k_base")
    history = [_item("anthropic", i % 3, f"m{i}", False, False) for i in range(8)]
    response = httpx.Response(200, json={"id": "m", "type": "message", "usage": {
        "input_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
        "output_tokens": 1}})
    for n in (6, 7, 8):
        content = canonical_json(_body("anthropic", history[:n], 3))
        pending = recorder.start("/v1/messages", {}, content)
        assert pending is not None and pending.state is not None
        recorder.finish(pending, Observation(status_code=200, body=response.content))
        assert pending.state.segmented is not None
        assert "data" not in pending.state.segmented.__dict__


def test_client_never_decodes_a_rendered_turn() -> None:
    """Through AnthropicClient no turn's ``ProviderRequest.body`` is decoded (its ``params``
    answer the client's checks; the recorder segments the bytes sent, incrementally from the
    third turn on: the second unmarks the first message, which the previous request sent with
    the end-of-history breakpoint), and its rows equal the transport path's."""
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
        # the headers the client sends (its anthropic-version is a recorded cache header)
        pending = plain.start("/v1/messages", {"anthropic-version": "2023-06-01"},
                              request.content, host="provider.test")
        assert pending is not None
        plain.finish(pending, Observation(status_code=200, body=_response("anthropic", 1)))
        conv.assistant(f"answer {i}")
    assert ["body" in r.__dict__ for r in sent] == [False] * 6
    drop = {"record_id", "predecessor_id", "ts_utc", "latency_ms"}
    assert comparable(client.recorder.records, drop) == comparable(plain.records, drop)


@pytest.mark.parametrize("in_thread", [False, True])
def test_streamed_turns_are_segmented_incrementally(in_thread: bool) -> None:
    """``send(..., stream=True)`` appends ``"stream": true`` after the rendered body's last
    byte; the bytes sent stay compact and their tail repeats, so from the third turn on the
    recorder still segments only the new items (``segment_rendered`` finds the previous
    request), inline and in thread."""
    from stableprompt import AnthropicClient, PromptBuilder, Tool
    from stableprompt._wire._resegment import LineageSegments

    events = ("event: message_start\ndata: " + json.dumps({
        "type": "message_start", "message": {"id": "msg_1", "usage": {
            "input_tokens": 5, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0, "output_tokens": 1}}})
        + "\n\nevent: message_stop\ndata: {\"type\": \"message_stop\"}\n\n").encode()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=events,
                              headers={"content-type": "text/event-stream"})

    found: list[bool] = []
    real = LineageSegments.segment_rendered

    def spy(self: LineageSegments, wire_format: str, content: bytes) -> Any:
        result = real(self, wire_format, content)
        found.append(result is not None)
        return result

    head = (PromptBuilder(tokenizer=None).system("Be brief.")
            .tools([Tool("t", "A tool.", {"type": "object"})]).freeze())
    conv = head.conversation()
    client = AnthropicClient("k", base_url="http://provider.test",
                             transport=httpx.MockTransport(answer), record_in_thread=in_thread,
                             recorder=Recorder(tokenizer="bytes/4"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LineageSegments, "segment_rendered", spy)
        for i in range(5):
            conv.user(f"question {i}")
            with client.send(conv.render().to_anthropic(model="m", max_tokens=5),
                             stream=True) as stream:
                list(stream)
            conv.assistant(f"answer {i}")
        client.close()
    assert found == [False, False, True, True, True]
    assert [r.turn for r in client.recorder.records] == [1, 2, 3, 4, 5]


def _plan(rng: random.Random) -> list[tuple[str, list[Any], int]]:
    """A random plan in the shape of ``steps`` (from a seeded generator)."""
    actions = ["append"] * 4 + ["edit", "truncate", "other", "head"]
    return [(rng.choice(actions),
             [(rng.randrange(4), rng.choice(["a", "b é", '"\\', ""]), rng.random() < 0.3,
               rng.random() < 0.2) for _ in range(rng.randrange(4))], rng.randrange(50))
            for _ in range(rng.randrange(1, 10))]


def _interleaved(wire: str, seed: int) -> list[tuple[float, str | None, bytes, bytes]]:
    """Calls of several conversations on one head, interleaved: (send time, session id or
    ``None``, body, response). Gaps from a second to past the TTL and the session window;
    usage reads a random share of the request (hits, misses, mutations, expiries)."""
    rng = random.Random(seed)
    conversations = [(rng.choice([None, None, f"s{i}"]), _bodies(wire, _plan(rng)))
                     for i in range(rng.randrange(2, 6))]
    calls, clock = [], 1_000.0
    while any(bodies for _, bodies in conversations):
        session, bodies = rng.choice([c for c in conversations if c[1]])
        clock += rng.choice([1.0, 2.0, 5.0, 20.0, 40.0, 400.0, 4_000.0])
        turn = rng.randrange(0, 40) if rng.random() < 0.8 else 10_000
        calls.append((clock, session, wire_json(bodies.pop(0)), _response(wire, turn)))
    return calls


def _recorded(calls: list[tuple[float, str | None, bytes, bytes]], wire: str, *,
              client: bool = False, reuse: bool = True,
              max_unnamed: int = 1024) -> list[dict[str, Any]]:
    """Ledger rows of ``calls`` recorded by one recorder, as JSON; ``predecessor_id`` as the
    index of the row it names (record ids are random)."""
    recorder = Recorder(tokenizer="bytes/4", keep_records=None)
    recorder._memory.index = CallIndex(window_s=recorder.session_window_s, max_unnamed=max_unnamed)
    if not reuse:
        recorder._memory.segments = LineageSegments(max_lineages=0)
    now = [0.0]
    recorder.clock = lambda: now[0]
    for ts, session, content, response in calls:
        now[0] = ts
        found = recorder.segment_rendered(wire, content) if client else None
        decoded = (found.segmented.body if found is not None else loads(content)) if client \
            else None
        headers = {} if session is None else {SESSION_HEADER: session}
        pending = recorder.start(PATHS[wire], headers, content, host="api.example.test",
                                 decoded=decoded, resegmented=found)
        assert pending is not None and pending.state is not None
        tokens = pending.state.segment_tokens or ()  # running sums carried over, as summed
        assert pending.state.cumulative_tokens is not None
        assert tuple(pending.state.cumulative_tokens) == tuple(itertools.accumulate(tokens))
        # the counts a remembered request keeps give the collector nothing to traverse per
        # count (arrays: their type only; a tuple of ints is traversed item by item)
        assert all(len(gc.get_referents(counts)) <= 1
                   for counts in (tokens, pending.state.cumulative_tokens))
        recorder.finish(pending, Observation(status_code=200, body=response, latency_ms=1.0))
    index = {r.record_id: i for i, r in enumerate(recorder.records)}
    rows = []
    for r in recorder.records:
        detail = orjson.dumps(r.verdict_detail).decode()  # a shared prefix names its call
        for record_id, i in index.items():
            detail = detail.replace(record_id, f"#{i}")
        rows.append({**r.model_dump(mode="json", exclude={"record_id"}),
                     "predecessor_id": index.get(r.predecessor_id or ""),
                     "verdict_detail": orjson.loads(detail),
                     "segment_digests": _named(r.segment_digests,
                                               {k: f"#{i}" for k, i in index.items()})})
    return rows


ROWS_DIGEST = "918926efbd0e5b98745ad2c435eb50aecdc6541e7ee6324f5c054a5bb2872fcf"
"""sha256 of the rows :func:`test_recorded_rows_are_pinned` records, computed before the recorder's
fast paths (lazy divergence classification, indexed conversations, shared token sums): a change
here changes a ledger row. Re-pinned on purpose this round, checked field by field against the
rows of the earlier digest (``41a1b2bb...``): a suspect usage report no longer sets
``usage_inconsistent`` (74 rows); fingerprints are tagged ``sp2:`` (issue 26 item 7: the hex
digests are unchanged); a request ending in a developer / system message now has its turn
boundary (152 rows that had none). No other field of any row moved. Issue 29 added
``verdict_detail["head_tokens"]`` (the what-if's head size): with it removed the rows give the
previous digest ``c04fa320...`` exactly. Issue 26 item 1 (``b1e17528...`` before), checked field
by field: the 12 ``client_mutation`` rows gained ``divergences`` and ``divergences_total``; 4 of
them, whose history the later request left out, are ``history-delete`` at the item
(``/input/0``, ``/messages/0``) instead of ``history-rewrite`` ("became"), with that item's
snippet. No other field of any row moved. Issues 26 items 2-4 and 8 (``6d6e2890...`` before),
checked field by field on the 1,146 rows: every row has ``request_headers`` (``{}``: no
allow-listed header sent); 153 rows with no call of their own conversation on their lineage
gained ``shared_prefix`` / ``shared_prefix_note`` (rule ``shared-prefix``), 25 of them a
predecessor (``predecessor_id``, ``lcp_*``, ``gap_s``, ``ttl_s``, ``relation``,
``other_conversation``; 19 a ``stable_prefix_tokens``), verdicts unchanged; the 8 requests
without a breakpoint are ``no_breakpoint`` (were ``below_minimum``), and 152
``expected_verdict`` / 90 ``reason`` values follow (``compared-no-breakpoint``); ``lost_tokens``
is capped at what the call could read (``lost_cap_tokens``, 172 rows; the 12 mutation rows'
``divergences`` lost tokens with it, e.g. 99,945 -> 12 where the usage reported 100,000 reads of
a 110-token request). Record ids inside ``verdict_detail`` are named by row index, as
``predecessor_id``. A prefix ending inside the predecessor's longest cache entry is anchored on
that entry's reported size when it is the nearest reported count (``c939dd28...`` before; found
on aider's traffic), checked field by field on the 1,146 rows: 2 rows moved, the same Anthropic
call at both memory sizes, whose usage is suspect (100,000 reads reported for a ~120-token
request): predicted 99,942 (this request's suspect total less our estimate) -> 121 (the
predecessor's entry of 187 reported tokens less our estimate), with ``reads_above_prediction``.
No other field of any row moved. Issue 30 item 2 (``c530e2e6...`` before): every one of the
1,146 rows gained ``segment_digests`` (schema v4, the request's segment outline); for each, the
outline's token counts sum to the row's ``request_tokens``, its last prefix digest is the first
32 hex digits of its ``request_fingerprint``, and its opening is the first message segment's
digest (1,022 rows; the 124 head-only requests, params, tools and system without messages, have
none); with the field removed the rows give ``c530e2e6...`` exactly (no other field of any row
moved). Issue 26's estimated spans (``04240bc3...`` before): 32 rows whose prediction rests
partly on our token estimate gained ``verdict_detail["estimated_span_tokens"]`` (6 to 66
tokens; 30 OpenAI rows whose LCP ends inside a request, 2 Anthropic hits); with the key removed
the rows give ``04240bc3...`` exactly (no other field of any row moved); the same 32 rows
then gained ``estimated_span_segments`` (1 to 5 segments; ``e87c40d3...`` without it).
Then (``67af5694...`` before) 149 ``shared_prefix`` objects gained ``differs_at_kind`` (the
segment kind of ``differs_at``, which the provider's miss reason is joined to); with the key
removed the rows give ``67af5694...`` exactly. Predictions anchored on
the nearest size the provider reported (``_sizes``; ``0b93cb94...`` before), checked
field by field: 4 rows moved, the two calls at both memory sizes whose usage is suspect
(100,000 reads reported for a ~120-token request): predicted 99,945 -> 237 and 121 -> 157,
now the prefix's size an earlier call reported (``anchored_on_reported_size``; the second
lost ``estimated_span_*``, its entry's own size being known) instead of this call's suspect
total less our estimate. No other field of any row moved. A read after the TTL takes the
no-TTL prediction's anchor detail (``e604b04f...`` before): 2 rows moved, the suspect
``read_after_ttl`` hit at both memory sizes (100,000 read, 237 predicted, unchanged) gained
``anchored_on_reported_size`` 0 (its entry's own size was reported; the detail had been the
alive entry's prediction's, which had none). No other field of any row moved. Delta outlines
(format 2; ``c7d7e572...`` before), checked field by field: 288 of the 1,146 rows store their
outline as a delta of their predecessor's row (depth 1 to 6; base record ids named by row
index), and every one decodes, through its base, to exactly the outline the row stored whole
before (segments, token counts, opening); no other field of any row moved; outline bytes
414,640 -> 306,698. Each prediction's anchor evidence
replaces the previous one's (``6d0dee67...`` before): 6 rows predicted 0 (nothing
alive after the TTL; 4 of them read anyway, ``read_after_ttl``) lost the
``anchored_on_predecessor`` the no-TTL prediction had left; no other field of any row moved."""


def test_recorded_rows_are_pinned() -> None:
    """Interleaved random conversations (named and unnamed, every wire format, a small and
    the default unnamed-call memory) give the pinned ledger rows on the transport path, the
    client path and without segment reuse."""
    rows = []
    for wire in sorted(PATHS):
        for seed in range(12):
            calls = _interleaved(wire, seed)
            for max_unnamed in (1024, 3):
                expected = _recorded(calls, wire, reuse=False, max_unnamed=max_unnamed)
                assert _recorded(calls, wire, max_unnamed=max_unnamed) == expected
                assert _recorded(calls, wire, client=True, max_unnamed=max_unnamed) == expected
                rows.append(expected)
    assert hashlib.sha256(canonical_json(rows)).hexdigest() == ROWS_DIGEST


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


def _own_references(new: object, old: object) -> int:
    """References held by the containers reachable from ``new`` but not from ``old`` (what
    ``new`` adds for the garbage collector to traverse; classes, modules and functions not
    followed)."""
    def reachable(root: object, stop: set[int]) -> list[object]:
        found, seen, stack = [], set(stop), [root]
        while stack:
            obj = stack.pop()
            if id(obj) in seen or not gc.is_tracked(obj) or isinstance(
                    obj, (type, types.ModuleType, types.FunctionType)):
                continue
            seen.add(id(obj))
            found.append(obj)
            stack.extend(gc.get_referents(obj))
        return found

    before = {id(obj) for obj in reachable(old, set())}
    return sum(len(gc.get_referents(obj)) for obj in reachable(new, before))


@pytest.mark.parametrize("wire", sorted(PATHS))
def test_a_turn_adds_references_for_what_is_new_only(wire: str) -> None:
    """A rendered turn's segments share the previous turn's list of segments and its body's
    history is a view over a list of items shared the same way (the body is made only when
    read): the references the turn adds for the garbage collector are those of its new
    segments and items, the same at 40 and at 400 items (a tuple of every segment and a
    list of every item per turn added one reference per segment and item of the
    conversation). The segments, data and body equal the from-scratch segmenting, and the
    request pickles as that one does."""
    added = []
    for size in (40, 400):
        lineages = LineageSegments()
        history = [_item(wire, i % 3, f"m{i}", False, False) for i in range(size)]
        made, bodies = [], []
        for turn in range(4):  # the breakpoint moves to the last item every turn
            history = [*history, _item(wire, turn % 3, f"n{turn}", False, False)]
            marked = [*history[:-1], _item(wire, turn % 3, f"n{turn}", True, False)]
            body = _body(wire, marked, 3)
            content = wire_json(body)
            found = lineages.segment_rendered(wire, content) or lineages.segment(
                wire, loads(content), content=content)
            made.append(found.segmented)
            bodies.append(body)
        assert found.reused > 0 and "body" not in made[-1].__dict__  # not made yet
        added.append(_own_references(made[-1], made[-2]))
        for segmented, body in zip(made, bodies, strict=True):
            _same(Resegmented(segmented), wire, body)
        assert made[-1].body is made[-1].body and type(made[-1].body) is dict
        assert pickle.dumps(made[-1]) == pickle.dumps(segment_request(wire, bodies[-1]))
        assert pickle.loads(pickle.dumps(made[-1])) == made[-1] == segment_request(
            wire, bodies[-1])
    assert added[0] == added[1] < 200


def test_a_rebuilt_body_is_made_once_when_read() -> None:
    """The body of a turn segmented from its bytes is made on its first read, once, even
    with threads racing for it; its view reads the same fields with the history as a
    sequence equal to the list, without making it."""
    lineages = LineageSegments()
    history = [_item("anthropic", i % 3, f"m{i}", False, False) for i in range(30)]
    first = wire_json(_body("anthropic", history, 3))
    lineages.segment("anthropic", loads(first), content=first)
    body = _body("anthropic", [*history, history[0]], 3)
    found = lineages.segment_rendered("anthropic", wire_json(body))
    assert found is not None
    segmented = found.segmented
    view = segmented._body_view
    assert list(view) == list(body) and view["messages"] == body["messages"]
    assert not isinstance(view["messages"], list) and segmented.model == "m"
    assert "body" not in segmented.__dict__
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        read = list(pool.map(lambda _: segmented.body, range(64)))
    assert all(b is read[0] for b in read) and read[0] == body
    assert type(read[0]["messages"]) is list and segmented._body_view is view


def _young_references_per_call(size: int, calls: int = 6) -> float:
    """References held by the young containers a client-path call (rendered bytes,
    recorded and finished) leaves behind, per call, at ``size`` history items."""
    recorder = Recorder(tokenizer="bytes/4", keep_records=10)
    history = [_item("anthropic", i % 3, f"m{i}", False, False) for i in range(size)]

    def call(turn: int) -> None:
        history.append(_item("anthropic", turn % 3, f"n{turn}", False, False))
        marked = [*history[:-1], _item("anthropic", turn % 3, f"n{turn}", True, False)]
        content = wire_json(_body("anthropic", marked, 3))
        pending = recorder.start("/v1/messages", {}, content, rendered=True)
        assert pending is not None
        recorder.finish(pending, Observation(status_code=200, body=_response("anthropic", turn)))

    for turn in range(6):
        call(turn)
    gc.collect()
    gc.disable()
    try:
        for turn in range(6, 6 + calls):
            call(turn)
        young = gc.get_objects(generation=0)
        return sum(len(gc.get_referents(obj)) for obj in young) / calls
    finally:
        gc.enable()


def test_young_references_per_call_do_not_grow_with_the_conversation() -> None:
    """What a recorded client-path call leaves in the young generation (what each young
    collection traverses, on whichever thread it lands) is about the same at 40 and 400
    history items: the recorder keeps no container per call that grows with the
    conversation (it kept a tuple of every segment and a list of every item)."""
    small, large = _young_references_per_call(40), _young_references_per_call(400)
    assert large - small < 40, (small, large)


def test_new_items_whose_bytes_only_match_in_length_are_not_reused_from() -> None:
    """A continuation's new items are kept for byte reuse only if they re-serialize to exactly
    their bytes: two items whose lengths change by opposite amounts (an escaped ``\\u00e9``
    shortens, a ``1e5`` lengthens) keep the total but shift the first one's end, so the next
    request of the conversation is parsed whole, and every request's segments equal
    ``segment_request``'s."""
    lineages = LineageSegments()
    opening = {"role": "user", "content": [{"type": "text", "text": "Start."}]}
    text = {"role": "user", "content": [{"type": "text", "text": "\u00e9" * 5 + " tail"}]}
    floats = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "go",
                                                "input": {"x": [1e5, 1e5, 1e5, 1e5]}}]}

    def body(*history: Any) -> dict[str, Any]:
        return {"max_tokens": 64, "messages": list(history), "model": "claude-sonnet-4-5",
                "system": [{"type": "text", "text": "Be careful. " * 20}]}

    first = wire_json(body(opening))
    assert lineages.segment_captured("anthropic", loads(first), first).segmented == \
        segment_request("anthropic", loads(first))
    second = wire_json(body(opening, text, floats))
    second = second.replace("\u00e9".encode(), b"\\u00e9").replace(b"100000.0", b"1e5")
    assert len(second) == len(wire_json(body(opening, text, floats)))  # same length
    found = lineages.segment_rendered("anthropic", second)
    assert found is not None and found.segmented == segment_request("anthropic", loads(second))
    latest = next(reversed(lineages._stored.values()))
    assert latest.around is None  # the end of the first new item was not kept from a length
    third = second.replace(b" tail", b" TAIL")
    assert lineages.segment_rendered("anthropic", third) is None  # parsed whole instead


@pytest.mark.parametrize("local", [False, True])
@pytest.mark.parametrize("at", [0, 2])
def test_a_cache_point_opening_a_new_message_marks_the_segment_before_it(
        local: bool, at: int) -> None:
    """A Converse ``cachePoint`` block that opens a new message marks the segment before it
    (the previous message's last block, or the head's last one), which the conversation's
    earlier request already held: those segments are not reused unmarked, every request's
    segments equal ``segment_request``'s (parsed, and read from the stored line's bytes)."""
    system = [{"text": "Be careful. " * 20}]
    user = {"role": "user", "content": [{"text": "Start."}]}
    reply = {"role": "assistant", "content": [{"text": "Done."}]}
    marked = {"role": "user", "content": [{"cachePoint": {"type": "default"}},
                                          {"text": "More."}]}
    history = [user, reply, user, reply][:at]

    def body(*items: Any) -> dict[str, Any]:
        return {"model": "m", "system": system, "messages": [*history, *items]}

    for read in ("segment", "segment_rendered"):
        lineages = LineageSegments(local_history=local)
        first = wire_json(body(user, reply))
        lineages.segment_captured("bedrock-converse", loads(first), first)
        second = wire_json(body(user, reply, marked))
        expected = segment_request("bedrock-converse", loads(second))
        assert any(s.breakpoint for s in expected.segments)
        found = lineages.segment("bedrock-converse", loads(second)) if read == "segment" \
            else lineages.segment_rendered("bedrock-converse", second)
        if found is not None:  # None: parsed whole (then segment says the same)
            assert [s.breakpoint for s in found.segmented.segments] == \
                [s.breakpoint for s in expected.segments]
