"""Lint with segment reuse (each request segments only what is new since its conversation's
previous request, ``_wire._resegment``) reports exactly what lint without reuse reports, on
random captures: appends, edits, reorders, truncations, compactions, head changes, moved
breakpoint markers, malformed items, interleaved conversations with and without session ids,
and more conversations than lint keeps."""

from __future__ import annotations

import copy
import gc
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stableprompt._canonical import wire_json
from stableprompt._exceptions import CaptureError
from stableprompt._lint import _linter
from stableprompt._lint._gc import no_full_collections
from stableprompt._lint._linter import lint_capture
from stableprompt._wire import _resegment
from stableprompt._wire._segmenter import SegmentBuilder
from test_resegment import PATHS, _item, items

ACTIONS = ["append", "append", "append", "edit", "reorder", "truncate", "compact", "other",
           "head", "system", "bad"]
plans = st.lists(st.tuples(st.sampled_from(ACTIONS), st.lists(items, min_size=0, max_size=3),
                           st.integers(0, 50)), min_size=1, max_size=6)
TOOLS = [{"name": f"tool_{i}", "description": f"Tool {i}. " * 3,
          "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}
         for i in range(4)]


def _body(wire: str, history: list[Any], tools: int, system: str) -> dict[str, Any]:
    key = "input" if wire == "openai-responses" else "messages"
    body: dict[str, Any] = {"model": "claude-sonnet-4-5" if wire == "anthropic" else "gpt-5.6"}
    if tools:
        body["tools"] = TOOLS[:tools]
    if wire == "anthropic":
        body["max_tokens"] = 64
        body["system"] = [{"type": "text", "text": system,
                           "cache_control": {"type": "ephemeral"}}]
    elif wire == "openai-responses":
        body["instructions"] = system
    else:
        history = [{"role": "system", "content": system}, *history]
    body[key] = history
    return body


def interleaved(queues: list[list[dict[str, Any]]],
                order: list[int]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every request of ``queues`` (one per conversation), each conversation's in its own
    order, the conversations interleaved as ``order`` picks them (then the first): ``(its
    conversation's index, the request)``."""
    turns = [0] * len(queues)
    picks = iter(order)
    while any(t < len(q) for t, q in zip(turns, queues, strict=True)):
        c = next(picks, 0) % len(queues)
        while turns[c] >= len(queues[c]):  # that one is done: the next one that is not
            c = (c + 1) % len(queues)
        yield c, queues[c][turns[c]]
        turns[c] += 1


def _conversation(wire: str, plan: list[tuple[str, list[Any], int]],
                  opening: str) -> list[dict[str, Any]]:
    """The requests of one conversation following ``plan`` (each a full body)."""
    history: list[Any] = [_item(wire, 0, opening, False, False)]
    tools, system = 4, "You are a careful agent. " * 3
    out = []
    for action, new, where in plan:
        fresh = [_item(wire, *spec) for spec in new]
        n = len(history)
        if action == "edit" and n:
            history[where % n] = fresh.pop() if fresh else _item(wire, 0, "e", False, True)
        elif action == "reorder" and n > 1:
            i, j = where % n, (where // 3) % n
            history[i], history[j] = history[j], history[i]
        elif action == "truncate" and n:
            history = history[: where % n]
        elif action == "compact" and n:  # a summary replaces all but the last few items
            history = [_item(wire, 0, f"summary {where}", False, False),
                       *history[n - where % 3:]]
        elif action == "other":
            history = [_item(wire, 0, opening if where % 2 else f"o{where}", False, False)]
        elif action == "head":
            tools = where % 5
        elif action == "system":
            system = f"You are agent {where % 3}. " * 3
        elif action == "bad":  # an item the format does not allow: a problem, not a request
            fresh.append(where)
        history = [*copy.deepcopy(history), *fresh]
        out.append(_body(wire, history, tools, system))
        if action == "bad":
            history = history[:-1]
    return out


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(wire_json(r) + b"\n" for r in records))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(wire=st.sampled_from(sorted(PATHS)), conversations=st.lists(plans, min_size=1,
                                                                     max_size=4),
       order=st.lists(st.integers(0, 3), max_size=40), ids=st.lists(st.booleans(), min_size=4,
                                                                     max_size=4),
       lineages=st.sampled_from([1, 2, 64]), openings=st.lists(
           st.sampled_from(["Fix the bug.", "Fix the bug!", "Write docs."]), min_size=4,
           max_size=4))
def test_lint_reports_equal_with_and_without_reuse(
        wire: str, conversations: list[Any], order: list[int], ids: list[bool],
        lineages: int, openings: list[str]) -> None:
    """Pairs, breaks, causes, findings and problems of a capture are the same whether lint
    reuses the segments of each conversation's previous request or segments every request
    whole (conversations interleaved, some with session ids, some without; lint keeping
    fewer conversations than the capture holds)."""
    queues = [_conversation(wire, plan, openings[c]) for c, plan in enumerate(conversations)]
    records = [{"request": body, "session": f"s{c}"} if ids[c] else body
               for c, body in interleaved(queues, order)]
    saved = _linter._LINEAGES
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.jsonl"
        _write(path, records)
        try:
            _linter._LINEAGES = lineages
            fast = _report_or_refusal(path)
        finally:
            _linter._LINEAGES = saved
        slow = _report_or_refusal(path, reuse=False)
    if isinstance(fast, str) or isinstance(slow, str):  # every request malformed: refused
        assert fast == slow
        return
    assert fast.as_dict() == slow.as_dict()
    assert fast == slow


def _report_or_refusal(path: Path, **options: Any) -> Any:
    """``lint_capture``'s report, or the message of its refusal (a capture whose every
    record is malformed holds no lintable request)."""
    try:
        return lint_capture(path, **options)
    except CaptureError as exc:
        return str(exc)


def test_reuse_segments_only_new_messages(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """In a capture of two interleaved growing conversations without session ids, each
    request after a conversation's first segments only its new messages (the counted
    ``content`` calls), and the report equals the one without reuse."""
    records = []
    for turn in range(1, 6):
        for opening in ("Fix the bug.", "Write docs."):
            history = [_item("anthropic", t % 3, f"{opening} {t}", False, False)
                       for t in range(turn * 2)]
            records.append(_body("anthropic", history, 4, "Be careful."))
    path = tmp_path / "capture.jsonl"
    _write(path, records)
    calls = 0
    original = SegmentBuilder.content

    def counted(self: SegmentBuilder, *args: Any) -> None:
        nonlocal calls
        calls += 1
        original(self, *args)

    monkeypatch.setattr(SegmentBuilder, "content", counted)
    fast = lint_capture(path)
    reused_calls, calls = calls, 0
    slow = lint_capture(path, reuse=False)
    assert fast == slow
    assert calls == sum(len(r["messages"]) for r in records)
    assert reused_calls == 2 * 5 * 2  # two conversations, five requests, two new items each


STYLES = ["compact", "compact", "compact", "spaced", "ascii", "history-first", "duplicate",
          "nested", "trailing-comma", "nan"]


def _styled(body: dict[str, Any], style: str, key: str) -> bytes:
    """``body`` as one capture line written in ``style``: what lint must read as
    ``_canonical.loads`` does (or report as it does) whatever it reuses."""
    compact = wire_json(body)
    if style == "spaced":
        return json.dumps(body).encode()
    if style == "ascii":
        return json.dumps(body, separators=(",", ":")).encode()
    if style == "history-first":
        return wire_json({key: body[key], **{k: v for k, v in body.items() if k != key}})
    if style == "duplicate":  # a second history key after the one the line first names
        return compact[:-1] + b',"' + key.encode() + b'":[]}'
    if style == "nested":  # a compact '"messages":[' in a tool schema, before the history
        tools = [{"name": "n", "input_schema": {"type": "object", "examples": {key: body[key]}}}]
        return wire_json({**body, "tools": tools, key: body[key]})
    if style == "trailing-comma":  # not JSON: a problem in both passes
        return compact[:-2] + b",]}"
    if style == "nan":  # a NaN item orjson rejects (the stdlib's scanner would not)
        return compact[:-2] + b",NaN]}"
    return compact


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(wire=st.sampled_from(sorted(PATHS)), conversations=st.lists(plans, min_size=1,
                                                                     max_size=3),
       order=st.lists(st.integers(0, 2), max_size=30),
       styles=st.lists(st.sampled_from(STYLES), min_size=1, max_size=30))
def test_lines_read_from_their_new_bytes_equal_parsed_lines(
        wire: str, conversations: list[Any], order: list[int], styles: list[str]) -> None:
    """Lint segments a line that re-sends its conversation from its new items' bytes only
    (``_Linter.decode``): the report equals lint without reuse (every line parsed whole)
    for lines written compact or not, with escapes, the history first, a duplicate history
    key, a compact history key nested in a tool schema, and malformed new items."""
    key = "input" if wire == "openai-responses" else "messages"
    queues = [_conversation(wire, plan, f"Task {c}.") for c, plan in enumerate(conversations)]
    lines = [_styled(body, styles[n % len(styles)], key)
             for n, (_, body) in enumerate(interleaved(queues, order))]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        fast, slow = _outcome(path, reuse=True), _outcome(path, reuse=False)
    assert fast == slow


def _outcome(path: Path, *, reuse: bool) -> Any:
    """The report of ``path`` as a dict, or the error lint raised (no lintable line)."""
    try:
        return lint_capture(path, reuse=reuse).as_dict()
    except CaptureError as exc:
        return repr(exc)


def test_a_line_re_sending_its_conversation_is_not_parsed_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two interleaved growing conversations written compact: only each conversation's first
    line is parsed whole; the others decode their two new items (and the report equals the
    one without reuse)."""
    records = []
    for turn in range(1, 6):
        for opening in ("Fix the bug.", "Write docs."):
            history = [_item("anthropic", t % 3, f"{opening} {t}", False, False)
                       for t in range(turn * 2)]
            records.append(_body("anthropic", history, 4, "Be careful."))
    path = tmp_path / "capture.jsonl"
    _write(path, records)
    whole: list[int] = []
    fresh: list[int] = []

    def counting(sizes: list[int]) -> Any:
        def decode(data: bytes) -> Any:
            sizes.append(len(data))
            return orjson.loads(data)
        return decode

    monkeypatch.setattr(_linter, "loads", counting(whole))
    monkeypatch.setattr(_resegment, "loads", counting(fresh))
    fast = lint_capture(path)
    assert len(whole) == 2
    assert len(fresh) == 8 and max(fresh) < min(whole)
    assert fast == lint_capture(path, reuse=False)


def test_lint_capture_runs_without_full_collections_and_restores_the_thresholds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While ``lint_capture`` reads and pairs, the cyclic GC has no full collection
    (generation-2 threshold out of reach); afterwards, and after a failed run, the
    thresholds are the caller's again, and nested uses restore them only when the last
    one ends."""
    records = [_body("anthropic", [_item("anthropic", 0, f"q{t}", False, False)], 2, "Be.")
               for t in range(3)]
    path = tmp_path / "capture.jsonl"
    _write(path, records)
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    original = _linter._Linter.add

    def add(self: Any, entry: Any) -> None:
        seen.append(gc.get_threshold())
        original(self, entry)

    monkeypatch.setattr(_linter._Linter, "add", add)
    gc.set_threshold(500, 7, 9)
    try:
        lint_capture(path)
        assert seen and all(t[:2] == (500, 7) and t[2] > 10**6 for t in seen)
        assert gc.get_threshold() == (500, 7, 9)
        (tmp_path / "empty.jsonl").write_bytes(b"")
        with pytest.raises(CaptureError):
            lint_capture(tmp_path / "empty.jsonl")
        assert gc.get_threshold() == (500, 7, 9)
        with no_full_collections():
            with no_full_collections():
                pass
            assert gc.get_threshold()[2] > 10**6
        assert gc.get_threshold() == (500, 7, 9)
    finally:
        gc.set_threshold(*before)


def test_a_line_naming_its_history_twice_is_parsed(tmp_path: Path) -> None:
    """A line with a second, constant history key after the first (the JSON value is the
    last one; both equal in the first line) is not continued from its bytes: the next
    lines, whose first history grew while the bytes around it stayed the same, are parsed,
    and lint reads the history the parser reads (the report equals lint without reuse)."""
    first = {"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]}
    head = b'{"model":"claude-sonnet-4-5","max_tokens":64,"messages":'
    tail = b',"system":"Be careful.","messages":' + wire_json([first, reply, first]) + b"}"
    lines = [head + wire_json(history) + tail for history in (
        [first, reply, first], [first, reply, first, reply], [first, reply, first, reply, first])]
    path = tmp_path / "capture.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    fast = lint_capture(path)
    assert fast == lint_capture(path, reuse=False)
    assert {p.size_bytes for p in fast.pairs} == {fast.pairs[0].size_bytes}  # same body
