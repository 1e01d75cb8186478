"""Lint keeps a request's segments as its head and a history its conversation shares
(``_segment.HeadedSegments``, made by ``_resegment``'s ``local_history`` mode without a
chained digest per history segment, and a pairing index that keeps the history of a request
under a head no other has as it is). What it prints is byte for byte what the tuples of
chained segments printed (``_linter._HEADED = False``: the path it replaces): text,
``--all`` and ``--json``, on a clock capture and on random captures with appends, items
inserted inside the history, edits, reorders, cuts, compactions, head and system changes
and malformed items, with and without a clock; and the parts answer what they answer on
chained segments: the index's holders and shared depth, the first divergent index, the
history-only-grew shortcut."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stableprompt._canonical import loads, wire_json
from stableprompt._diff import first_divergent_index
from stableprompt._diff._history import history_ops
from stableprompt._lint import _linter
from stableprompt._lint._linter import lint_requests
from stableprompt._lint._requests import Req, RequestIndex
from stableprompt._segment import (
    HeadedSegments,
    Segment,
    SegmentBytes,
    SegmentSpec,
    build_segments,
)
from stableprompt._wire import _formats, _resegment
from test_formats_detect import _walked, bodies, messages
from test_lint_outputs_fast import _OUTPUTS, _bench_capture, _printed
from test_lint_reuse import _conversation, _write, interleaved, plans
from test_resegment import PATHS


def _headed_and_chained(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    after = [_printed(path, extra) for extra in _OUTPUTS]
    with monkeypatch.context() as patched:
        patched.setattr(_linter, "_HEADED", False)
        before = [_printed(path, extra) for extra in _OUTPUTS]
    assert after == before
    assert all(after)


def test_clock_capture_prints_what_chained_segments_print(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "clock.jsonl"
    _bench_capture()(path, requests=60, sessions=4, clock=True)
    _headed_and_chained(path, monkeypatch)
    assert b"volatile-token" in _printed(path, ["--json"])


def test_claude_code_ordered_clock_capture_prints_what_chained_segments_print(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same capture in Claude Code's key order (the history second, the changing
    system prompt after it): its lines are read from the stored lines' bytes."""
    path = tmp_path / "clock.jsonl"
    _bench_capture()(path, requests=60, sessions=4, clock=True, order="claude-code")
    _headed_and_chained(path, monkeypatch)
    assert b"volatile-token" in _printed(path, ["--json"])


def _clocked(records: list[dict[str, Any]], body: dict[str, Any], c: int) -> None:
    stamp = f"Current time: 2026-11-30T00:{len(records) % 60:02d}:0{c}Z\n\n"
    for key in ("system", "instructions"):
        if isinstance(body.get(key), str):
            body[key] = stamp + body[key]
        elif isinstance(body.get(key), list):
            body[key] = [{**body[key][0], "text": stamp + body[key][0]["text"]},
                         *body[key][1:]]
    if isinstance(body.get("messages"), list) and body["messages"] and \
            isinstance(body["messages"][0], dict) and body["messages"][0].get("role") == "system":
        first = body["messages"][0]  # Chat's system message: a leading history item
        body["messages"] = [{**first, "content": stamp + str(first.get("content"))},
                            *body["messages"][1:]]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(wire=st.sampled_from(sorted(PATHS)), conversations=st.lists(plans, min_size=1,
                                                                     max_size=3),
       order=st.lists(st.integers(0, 2), max_size=30),
       clock=st.sampled_from([None, "every", "some"]), insert=st.none() | st.integers(0, 50))
def test_edited_captures_print_what_chained_segments_print(
        wire: str, conversations: list[Any], order: list[int], clock: str | None,
        insert: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    queues = [_conversation(wire, plan, f"Task {c}.") for c, plan in enumerate(conversations)]
    if insert is not None:  # from one request on, an item inserted inside the history
        key = "input" if wire == "openai-responses" else "messages"
        for queue in queues:
            for body in queue[insert % len(queue):]:
                history = body[key]
                history.insert(insert % (len(history) + 1), copy.deepcopy(history[-1]))
    records: list[dict[str, Any]] = []
    for c, body in interleaved(queues, order):
        if clock == "every" or (clock == "some" and len(records) % 3 == 0):
            _clocked(records, body, c)  # every head new, or a head coming back
        records.append(body)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.jsonl"
        _write(path, records)
        _headed_and_chained(path, monkeypatch)
        report = lint_requests(records)  # the request-list door: views made from tuples
        with monkeypatch.context() as patched:
            patched.setattr(_linter, "_HEADED", False)
            assert lint_requests(records) == report


def test_instructions_and_a_developer_item_with_the_same_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Responses request whose ``instructions`` holds what the next one sends as its
    leading developer item (the same segment bytes, split elsewhere between head and
    history): paired and compared as the chained segments compare them."""
    tools = [{"type": "function", "name": "t", "parameters": {"type": "object"}}]
    first = {"model": "gpt-5.6", "tools": tools, "instructions": "Be brief.",
             "input": [{"role": "user", "content": "hi"}]}
    second = {"model": "gpt-5.6", "tools": tools,
              "input": [{"role": "developer", "content": "Be brief."},
                        {"role": "user", "content": "hi"},
                        {"role": "assistant", "content": "hello"},
                        {"role": "user", "content": "more"}]}
    records = [first, second, copy.deepcopy(first), copy.deepcopy(second)]
    report = lint_requests(records)
    with monkeypatch.context() as patched:
        patched.setattr(_linter, "_HEADED", False)
        assert lint_requests(records) == report
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.jsonl"
        _write(path, records)
        _headed_and_chained(path, monkeypatch)


# -- the parts, on views of random chains ----------------------------------------------------

chains = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12), st.integers(0, 3),
                            st.lists(st.sampled_from([b"a", b"b", b"cc"]), max_size=4)),
                  min_size=1, max_size=30)


def _segments(head: int, datas: list[bytes]) -> tuple[tuple[Segment, ...], bytes]:
    """Chained segments: ``head`` system segments (their bytes by ``head``), then messages
    (one item each)."""
    specs = [SegmentSpec("system", f"system[{i}]", b"s%d" % head, f"/system/{i}")
             for i in range(head % 3)]
    specs += [SegmentSpec("message", f"messages[{i}]", d, f"/messages/{i}")
              for i, d in enumerate(datas)]
    segments, data, _ = build_segments(specs)
    return segments, data


def _view(segments: tuple[Segment, ...], data: bytes) -> HeadedSegments:
    return HeadedSegments.of(segments, data)


def _req(pos: int, segments: Any, data: bytes) -> Req:
    return Req(pos=pos, index=pos, source=f"r{pos}", wire_format="anthropic", group=None,
               scope=None, session=None, hinted=False, model="m", segments=segments,
               data=SegmentBytes((data,)), has_assistant=False, breakpoints=(),
               first_message_digest=None)


def test_a_view_reads_as_its_chained_segments() -> None:
    segments, data = _segments(2, [b"a", b"bb", b"c"])
    view = _view(segments, data)
    assert len(view) == len(segments) and view.heads == 2
    for got, want in zip(view, segments, strict=True):
        assert (got.kind, got.name, got.start, got.end, got.digest, got.path) == \
            (want.kind, want.name, want.start, want.end, want.digest, want.path)
        assert data[got.start:got.end] == data[want.start:want.end]
    assert list(reversed(view)) == list(view)[::-1]
    assert view[1:4] == tuple(view)[1:4] and view[-1] == tuple(view)[-1]
    assert [s.prefix_digest for s in view[:2]] == [s.prefix_digest for s in segments[:2]]
    with pytest.raises(IndexError):
        view[len(view)]


@settings(max_examples=300, deadline=None)
@given(plans=chains)
def test_index_of_views_holds_what_a_list_per_digest_holds(
        plans: list[tuple[int, int, int, list[bytes]]]) -> None:
    """After each request (a view): a digest is held by the same requests in the same
    order, the shared depth is the one scanning those lists gives, and the last request
    ending in each digest is the one the lists name; the same depths as chained segments
    give (views compare as their chains do)."""
    index, chained = RequestIndex(), RequestIndex()
    naive: dict[str, list[int]] = {}
    lasts: dict[str, int] = {}
    history: list[list[bytes]] = []
    for pos, (base, cut, head, fresh) in enumerate(plans):
        prefix = history[base % len(history)][:cut] if history and base % 4 else []
        history.append([*prefix, *fresh])
        segments, data = _segments(head, history[-1])
        view = _view(segments, data)
        req = _req(pos, view, data)
        depth = 0
        while depth < len(view) and view[depth].prefix_digest in naive:
            depth += 1
        assert index.shared(view) == depth == chained.shared(segments)
        index.add(req)
        chained.add(_req(pos, segments, data))
        for s in view:
            naive.setdefault(s.prefix_digest, []).append(pos)
        if len(view):
            lasts[view[-1].prefix_digest] = pos
        assert all(index.holders(d) == positions for d, positions in naive.items())
        assert index.by_last == lasts
        with pytest.raises(KeyError):
            index.holders(f"{view.key}:nothing")


@settings(max_examples=300, deadline=None)
@given(a=st.tuples(st.integers(0, 5), st.lists(st.sampled_from([b"a", b"b"]), max_size=6)),
       b=st.tuples(st.integers(0, 5), st.lists(st.sampled_from([b"a", b"b"]), max_size=6)),
       start=st.integers(0, 3))
def test_first_divergent_index_of_views(a: tuple[int, list[bytes]], b: tuple[int, list[bytes]],
                                        start: int) -> None:
    sa, da = _segments(*a)
    sb, db = _segments(*b)
    agree = first_divergent_index(sa, sb)
    start = min(start, agree)
    assert first_divergent_index(_view(sa, da), _view(sb, db), start) == \
        first_divergent_index(sa, sb, start)
    if a[0] % 3 and b[0] % 3 and sa and sb and sa[0].kind == sb[0].kind:
        ops_views = history_ops(_view(sa, da), _view(sb, db), a[0] % 3, b[0] % 3)
        assert ops_views == history_ops(sa, sb, a[0] % 3, b[0] % 3)


# -- lines read from a stored line's bytes (_resegment.segment_reheaded) ---------------------

_TOOLS = [{"name": f"t{i}", "description": "d" * 40, "input_schema": {
    "type": "object", "properties": {"messages": {"type": "array"}}}} for i in range(3)]


def _line(turn: int, head: int, style: str, extra: int) -> bytes:
    """A capture line of one conversation at ``turn`` (its history grows by two items a
    turn) whose fields outside the history vary with ``head``, written in ``style``."""
    history: list[dict[str, Any]] = [{"role": "user", "content": f"task {extra % 2}"}]
    for i in range(turn):
        history += [{"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}]},
                    {"role": "user", "content": [{"type": "text", "text": f"u{i}"}]}]
    system = [{"type": "text", "text": f"Now: {head % 4}. Be careful."}]
    fields: list[tuple[str, bytes]] = [
        ("model", b'"claude-sonnet-4-5"'),
        ("max_tokens", b"%d" % (1024 if head % 3 else 10245)),
        ("tools", wire_json(_TOOLS[:2 + head % 2])),
        ("system", wire_json(system)),
        ("messages", wire_json(history))]
    if style == "system-last":
        fields = [*fields[:3], fields[4], fields[3]]
    elif style == "spaces":
        fields[3] = ("system", b' [ {"type": "text", "text": "Now: %d."} ]' % (head % 4))
    elif style == "duplicate":
        fields.insert(3, ("model", b'"claude-opus-4-5"'))
    elif style == "escaped":
        fields[3] = ("system", b'[{"type":"text","text":"Now: \\u00e9 %d"}]' % (head % 4))
    elif style == "nested":  # the history key in a tool schema, before the history
        fields[2] = ("tools", wire_json([{**_TOOLS[0], "input_schema": {
            "type": "object", "messages": [1]}}]))
    return b"{" + b",".join(b'"%s":%s' % (k.encode(), v) for k, v in fields) + b"}"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6),
                                st.sampled_from(["compact", "compact", "system-last", "spaces",
                                                 "duplicate", "escaped", "nested"]),
                                st.integers(0, 3)), min_size=1, max_size=12))
def test_lines_read_from_stored_lines_equal_parsed_lines(
        steps: list[tuple[int, int, str, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line lint decodes equals what ``loads`` makes of it (whichever way it was
    read: whole, from a stored line with the same head, or from one with another head),
    and the report is the chained segments' (field order, spaces, duplicate keys, escapes,
    the history key nested in a tool, numbers sharing digits, histories grown, cut, new)."""
    lines, turn = [], 0
    for grow, head, style, extra in steps:
        turn = turn + grow if grow < 3 else 0
        lines.append(_line(turn, head, style, extra))
    decoded: list[tuple[Any, bytes]] = []
    real = _linter._Linter.decode

    def decode(self: Any, line: bytes) -> Any:
        value = real(self, line)
        decoded.append((value, line))
        return value

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        with monkeypatch.context() as patched:
            patched.setattr(_linter._Linter, "decode", decode)
            _printed(path, [])
        assert [value for value, _ in decoded] == [loads(line) for _, line in decoded]
        assert len(decoded) == len(lines)
        _headed_and_chained(path, monkeypatch)


def test_a_clock_line_is_read_from_the_stored_line(tmp_path: Path) -> None:
    """The common case takes the fast path: a line whose head changed and whose history
    grew is read from its conversation's stored line (not parsed whole)."""
    path = tmp_path / "clock.jsonl"
    _bench_capture()(path, requests=30, sessions=3, clock=True)
    seen: list[bool] = []
    real = _resegment.LineageSegments.segment_reheaded

    def reheaded(self: Any, wire_format: str, content: bytes) -> Any:
        found = real(self, wire_format, content)
        seen.append(found is not None)
        return found

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(_resegment.LineageSegments, "segment_reheaded", reheaded)
        _linter.lint_capture(path)
    assert sum(seen) == 27  # every line but each conversation's first


# -- format detection reading a request's new messages only (_formats.PlainMessages) ---------


@settings(max_examples=300, deadline=None)
@given(first=bodies, more=st.lists(st.tuples(st.integers(0, 6), st.lists(messages, max_size=3),
                                             st.booleans()), max_size=6))
def test_detect_with_plain_messages_answers_as_detect(
        first: dict[str, Any], more: list[tuple[int, list[Any], bool]]) -> None:
    """Bodies re-sending the first messages of earlier ones (the same objects, or copies),
    with new messages and other fields: ``detect`` with the lists it keeps answers as
    ``detect`` alone, on every body."""
    plain = _formats.PlainMessages()
    seen = [first]
    for cut, fresh, copied in more:
        base = seen[cut % len(seen)]
        history = base.get("messages")
        kept = history[:cut] if isinstance(history, list) else []
        body = {**base, "messages": [*(copy.deepcopy(kept) if copied else kept), *fresh]}
        seen.append(body)
    for body in seen:
        assert _formats.detect(body, plain=plain) == _formats.detect(body)
        assert _formats._is_converse(body, plain) is _walked(body)


def test_leading_system_messages_stay_in_the_head(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A Chat conversation opening with a system message (a leading history item whose
    segments are of a head kind), its tools changed midway: ``_resegment`` makes each
    request's view with those segments in its head (none is made again from chained
    segments: ``HeadedSegments.of`` would rehash the history), and the report is the
    chained segments'."""
    tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": {}}}
             for i in range(3)]
    records, history = [], [{"role": "system", "content": "Be brief."},
                            {"role": "system", "content": "Use tools."},
                            {"role": "user", "content": "hi"}]
    for turn in range(8):
        history = [*history, {"role": "assistant", "content": f"a{turn}"},
                   {"role": "user", "content": f"u{turn}"}]
        records.append({"model": "gpt-5.6", "tools": tools[:2 + (turn >= 4)],
                        "messages": copy.deepcopy(history)})
    path = tmp_path / "chat.jsonl"
    _write(path, records)
    made: list[int] = []
    real = HeadedSegments.of.__func__  # type: ignore[attr-defined]

    def counted(cls: Any, segments: Any, data: bytes) -> HeadedSegments:
        made.append(1)
        view: HeadedSegments = real(cls, segments, data)
        return view

    with monkeypatch.context() as patched:
        patched.setattr(HeadedSegments, "of", classmethod(counted))
        report = _linter.lint_capture(path)
    assert not made
    assert report.summary.breaks == 1  # the tool added
    _headed_and_chained(path, monkeypatch)
