"""Adversarial capture lines for lint's reading of a line from its conversation's stored line
(``LineageSegments.segment_reheaded``): each capture prints byte for byte what the chained
segments print (``_linter._HEADED = False``, lines parsed whole), text, ``--all`` and
``--json``. Each case is a class of input that once printed something else."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt._canonical import loads, wire_json
from stableprompt._exceptions import CaptureError
from stableprompt._wire._formats import segment_request
from stableprompt._wire._resegment import LineageSegments
from test_lint_headed import _headed_and_chained

_SYSTEM = "You are an agent. " * 8


def _history(turn: int) -> list[dict[str, Any]]:
    """A conversation's history at ``turn`` (two items a turn)."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "hello there"}]
    for i in range(turn):
        items += [{"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}]},
                  {"role": "user", "content": [{"type": "text", "text": f"u{i}"}]}]
    return items


def _body(turn: int, clock: int, **fields: Any) -> dict[str, Any]:
    """An Anthropic body at ``turn`` whose system prompt holds ``clock``; ``fields`` go
    after the system prompt, before the history (the last member)."""
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024,
            "system": f"{_SYSTEM}Time: 12:{clock:02d}", **fields, "messages": _history(turn)}


def _nested(depth: int) -> Any:
    """A value nested ``depth`` arrays deep (orjson writes 255 levels, reads 1,024)."""
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def _deep(body: dict[str, Any]) -> bytes:
    """``body``'s compact JSON written by the standard library (any depth)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


_CASES: dict[str, list[dict[str, Any] | bytes]] = {
    # a member inserted just before the history, every member before it the stored line's:
    # the line's head is not the stored line's (tool_choice is a param of the head)
    "member-inserted-before-history-same-clock": [
        _body(0, 0), _body(1, 0), _body(2, 0, tool_choice={"type": "auto"}), _body(3, 0)],
    "member-inserted-before-history-other-clock": [
        _body(0, 0), _body(1, 1), _body(2, 1, tool_choice={"type": "auto"}),
        _body(3, 2, tool_choice={"type": "auto"}), _body(4, 2)],
    # a top-level cache_control (automatic caching) marks the last item: the history's
    # segments are not those of a line without it
    "top-level-cache-control-added": [
        _body(0, 0), _body(1, 1, cache_control={"type": "ephemeral"}),
        _body(2, 2, cache_control={"type": "ephemeral"}), _body(3, 3)],
    "top-level-cache-control-same-clock": [
        _body(0, 0), _body(1, 0), _body(2, 0, cache_control={"type": "ephemeral"}),
        _body(3, 0, cache_control={"type": "ephemeral"})],
    # a decoded member (no head segment of it) nested deeper than orjson writes
    "member-nested-deeper-than-orjson-writes": [
        _body(0, 0), _deep(_body(1, 1, metadata={"x": _nested(300)})),
        _deep(_body(2, 2, metadata={"x": _nested(300)})), _body(3, 3)],
}


def _raw(body: dict[str, Any], old: bytes, new: bytes) -> bytes:
    """``body``'s compact JSON with its first ``old`` written as ``new`` (same JSON value,
    or a line that is not the body's compact dump)."""
    line = wire_json(body)
    assert old in line
    return line.replace(old, new, 1)


_HISTORY = b'"messages":['
# Lines read from stored lines that printed what parsed lines print when tried (kept so
# they go on doing so): every line a clock line re-sending the conversation.
_CASES.update({
    "spaces-in-a-decoded-member": [
        _body(0, 0), _raw(_body(1, 1), b'"system":"', b'"system" : "'), _body(2, 2)],
    "escaped-character-in-a-decoded-member": [
        _body(0, 0), _raw(_body(1, 1), b"agent", b"\\u0061gent"), _body(2, 2)],
    "duplicate-member-before-the-history": [
        _body(0, 0), _raw(_body(1, 1), b'"system"', b'"system":"other","system"'),
        _body(2, 2)],
    "duplicate-history-with-spaces-first": [
        _body(0, 0), _raw(_body(1, 1), _HISTORY, b'"messages": [1],' + _HISTORY),
        _body(2, 2)],
    "history-not-last": [
        _body(0, 0), _raw(_body(1, 1), b"]}", b'],"stream":true}'), _body(2, 2)],
    "number-written-otherwise": [
        _body(0, 0), _raw(_body(1, 1), b"1024", b"1.024e3"), _body(2, 2)],
    "crlf-and-trailing-space": [
        _body(0, 0), wire_json(_body(1, 1)) + b"\r", wire_json(_body(2, 2)) + b" ",
        _body(3, 3)],
    "byte-order-mark": [_body(0, 0), b"\xef\xbb\xbf" + wire_json(_body(1, 1)), _body(2, 2)],
    "truncated-line-in-a-run": [
        _body(0, 0), wire_json(_body(1, 1))[:-3], _body(2, 2), _body(3, 3)],
    "invalid-utf8-in-a-new-item": [
        _body(0, 0), _raw(_body(1, 1), b"u0", b"u\xff0"), _body(2, 2)],
    "history-key-nested-in-a-decoded-member": [
        _body(0, 0), _body(1, 1, metadata={"messages": _history(0)}), _body(2, 2)],
    # the history in the middle (Claude Code's order): the members after it compared with
    # the stored line's, the changed ones decoded alone
    "claude-code-order-clock-after-history": [
        {"model": "m", "messages": _history(t), "system": f"{_SYSTEM}Time: 12:0{t}",
         "tools": [{"name": "read", "input_schema": {"type": "object"}}], "max_tokens": 1}
        for t in range(5)],
    "claude-code-order-member-dropped-after-history": [
        {"model": "m", "messages": _history(t), "system": f"{_SYSTEM}Time: 12:0{t}",
         **({"tools": [{"name": "read", "input_schema": {"type": "object"}}]} if t != 2
            else {}), "max_tokens": 1} for t in range(5)],
    "claude-code-order-history-key-again-after-history": [
        {"model": "m", "messages": _history(0), "system": "s0", "max_tokens": 1},
        _raw({"model": "m", "messages": _history(1), "system": "s1", "max_tokens": 1},
             b'"max_tokens":1}', b'"max_tokens":1,"messages":[]}'),
        {"model": "m", "messages": _history(2), "system": "s2", "max_tokens": 1}],
    "claude-code-order-cache-control-after-history": [
        {"model": "m", "messages": _history(0), "system": "s0", "max_tokens": 1},
        {"model": "m", "messages": _history(1), "system": "s1", "max_tokens": 1,
         "cache_control": {"type": "ephemeral"}},
        {"model": "m", "messages": _history(2), "system": "s2", "max_tokens": 1}],
    "history-shrinks-and-is-edited": [
        _body(2, 0), _body(1, 1), _raw(_body(3, 2), b'"a1"', b'"A1"'), _body(3, 3)],
    "members-reordered": [
        _body(0, 0), {"system": f"{_SYSTEM}Time: 12:01", "max_tokens": 1024,
                      "model": "claude-sonnet-4-5", "messages": _history(1)}, _body(2, 2)],
})


@pytest.mark.parametrize("case", sorted(_CASES))
def test_reheaded_lines_print_what_parsed_lines_print(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "capture.jsonl"
    path.write_bytes(b"".join((body if isinstance(body, bytes) else wire_json(body)) + b"\n"
                              for body in _CASES[case]))
    _headed_and_chained(path, monkeypatch)


# -- segment_reheaded against parsing: byte edits of the fields before the history ----------

_TOKENS = [b" ", b",", b'"', b":", b"{", b"}", b"[", b"]", b'"messages":[', b'"model":"x"',
           b'"system":"s"', b"1", b"\\u0041", b'"cache_control":{"type":"ephemeral"}',
           b'"tool_choice":{"type":"any"}']
_edits = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10**6), st.integers(0, 10**6),
                            st.sampled_from(_TOKENS)), max_size=3)


def _edited(line: bytes, edits: list[tuple[int, int, int, bytes]]) -> bytes:
    """``line`` with its bytes before the history edited: a token inserted, a few bytes
    deleted, or some of its own bytes copied elsewhere."""
    at = line.find(_HISTORY)
    before = bytearray(line[:at])
    for op, where, other, token in edits:
        i = where % (len(before) + 1)
        if op == 0:
            before[i:i] = token
        elif op == 1:
            del before[i:i + 1 + other % 4]
        else:
            j = other % max(len(before), 1)
            before[i:i] = before[j:j + 1 + other % 30]
    return bytes(before) + line[at:]


@settings(max_examples=300, deadline=None)
def _read_checked(lineages: LineageSegments, line: bytes) -> bool:
    """Read ``line`` from its conversation's stored line (``segment_reheaded``), or, declined,
    parse and store it as lint does (``segment_captured``). A line read must be the body
    ``loads`` makes of it (values and key order) with the segments ``segment_request`` makes
    of that body. Returns whether it was read."""
    try:
        parsed = loads(line)
    except ValueError:
        parsed = None
    try:
        found = lineages.segment_reheaded("anthropic", line)
    except CaptureError:
        found = None
    if found is None:
        if isinstance(parsed, dict):
            with contextlib.suppress(CaptureError):
                lineages.segment_captured("anthropic", parsed, line)
        return False
    assert parsed is not None
    body = found.segmented.body
    assert body == parsed and list(body) == list(parsed)
    expected = segment_request("anthropic", parsed)
    assert [(s.kind, s.name, s.digest, s.breakpoint, s.path)
            for s in found.segmented.segments] == \
        [(s.kind, s.name, s.digest, s.breakpoint, s.path) for s in expected.segments]
    assert found.segmented.data == expected.data
    return True


@given(turns=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), _edits), min_size=1,
                      max_size=5),
       tool_choice=st.lists(st.booleans(), min_size=5, max_size=5))
def test_lines_read_from_stored_lines_are_the_parsed_lines(
        turns: list[tuple[int, int, list[tuple[int, int, int, bytes]]]],
        tool_choice: list[bool]) -> None:
    """A line ``segment_reheaded`` reads is the body ``loads`` makes of it (values and key
    order) with the segments ``segment_request`` makes of that body; a line it declines is
    parsed and stored (``segment_captured``) as lint does."""
    lineages = LineageSegments(local_history=True)
    first = wire_json(_body(1, 0))
    lineages.segment_captured("anthropic", loads(first), first)
    turn = 1
    for (grow, clock, edits), choice in zip(turns, tool_choice, strict=False):
        turn += grow
        fields = {"tool_choice": {"type": "auto"}} if choice else {}
        _read_checked(lineages, _edited(wire_json(_body(turn, clock, **fields)), edits))


# -- the history in the middle (Claude Code's order: model, messages, system, tools, ...) ----

def _middle_body(turn: int, clock: int, **fields: Any) -> dict[str, Any]:
    """An Anthropic body at ``turn`` in Claude Code's key order (the history second, the
    system prompt holding ``clock`` and the tools after it; ``fields`` last), as
    ``tests/fixtures/harness/claude-code-2.1.332.jsonl.gz`` sends them."""
    return {"model": "claude-sonnet-4-5", "messages": _history(turn),
            "system": f"{_SYSTEM}Time: 12:{clock:02d}",
            "tools": [{"name": "read", "input_schema": {"type": "object"}}],
            "max_tokens": 1024, **fields}


_MIDDLE_TOKENS = [*_TOKENS, b'"tools":[]', b'"max_tokens":1', b"],", b'],"system":"s"',
                  b'{"role":"user","content":"x"}', b',{"role":"user","content":"x"}']


def _edited_anywhere(line: bytes, edits: list[tuple[int, int, int, int, bytes]]) -> bytes:
    """``line`` with bytes edited before its history (region 0), inside it (1) or after it
    (2): a token inserted, a few bytes deleted, or some of its own bytes copied there."""
    at = line.find(_HISTORY)
    close = line.find(b'],"system":', at)
    parts = [bytearray(line[:at]), bytearray(line[at:close + 1]), bytearray(line[close + 1:])]
    for region, op, where, other, token in edits:
        part = parts[region]
        i = where % (len(part) + 1)
        if op == 0:
            part[i:i] = token
        elif op == 1:
            del part[i:i + 1 + other % 4]
        else:
            j = other % max(len(part), 1)
            part[i:i] = part[j:j + 1 + other % 30]
    return b"".join(bytes(part) for part in parts)


_middle_edits = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 10**6),
                                   st.integers(0, 10**6), st.sampled_from(_MIDDLE_TOKENS)),
                         max_size=3)


@settings(max_examples=400, deadline=None)
@given(turns=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), _middle_edits),
                      min_size=1, max_size=6),
       extra=st.lists(st.sampled_from([None, "tool_choice", "stream", "drop-tools"]),
                      min_size=6, max_size=6))
def test_history_in_the_middle_read_from_stored_lines_is_the_parsed_line(
        turns: list[tuple[int, int, list[tuple[int, int, int, int, bytes]]]],
        extra: list[str | None]) -> None:
    """As the test above, on lines whose history is not their last member (Claude Code's
    order), with byte edits before, inside and after the history, members added after it
    or removed: a line ``segment_reheaded`` reads is ``loads`` of it with the segments
    ``segment_request`` makes; one it declines is parsed and stored as lint does."""
    lineages = LineageSegments(local_history=True)
    first = wire_json(_middle_body(1, 0))
    lineages.segment_captured("anthropic", loads(first), first)
    turn, read = 1, 0
    for (grow, clock, edits), change in zip(turns, extra, strict=False):
        turn += grow
        body = _middle_body(turn, clock, **({"tool_choice": {"type": "auto"}}
                                             if change == "tool_choice" else
                                             {"stream": True} if change == "stream" else {}))
        if change == "drop-tools":
            del body["tools"]
        read += _read_checked(lineages, _edited_anywhere(wire_json(body), edits))


def test_claude_code_ordered_clock_lines_are_read_from_stored_lines() -> None:
    """Every continuation of a Claude-Code-ordered conversation whose system prompt (after
    the history) changes each turn is read from the stored line, not parsed whole."""
    lineages = LineageSegments(local_history=True)
    first = wire_json(_middle_body(1, 0))
    lineages.segment_captured("anthropic", loads(first), first)
    for turn in range(2, 8):
        line = wire_json(_middle_body(turn, turn))
        found = lineages.segment_reheaded("anthropic", line)
        assert found is not None, turn
        assert found.segmented.body == loads(line)
        assert list(found.segmented.body) == ["model", "messages", "system", "tools",
                                              "max_tokens"]
        assert found.segmented.data == segment_request("anthropic", loads(line)).data


# -- the history's end found by its stored line's next member name: the search string
# (``],"system":``) elsewhere, members after the history otherwise written -----------------

def _with_item(body: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """``body`` with ``item`` appended to its history, its key order kept."""
    return {name: [*value, item] if name == "messages" else value
            for name, value in body.items()}


def _after_history(body: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    """``body`` with the member ``name`` inserted right after its history."""
    out: dict[str, Any] = {}
    for key, kept in body.items():
        out[key] = kept
        if key == "messages":
            out[name] = value
    return out


_SEARCHED = b'"max_tokens":1024'
# (lines, which of them after the first are read from the stored line: True, else parsed)
_MIDDLE_CASES: dict[str, tuple[list[dict[str, Any] | bytes], list[bool]]] = {
    "search-string-in-a-new-item-text": ([
        _middle_body(0, 0),
        _with_item(_middle_body(1, 1), {"role": "assistant",
                                        "content": '],"system":[{"a":1}],"tools":['}),
        _middle_body(2, 2)], [True, True]),
    # the first candidate "]" is inside a new item: its bytes do not decode, parsed whole
    "search-string-as-structure-in-a-new-item": ([
        _middle_body(0, 0),
        _with_item(_middle_body(1, 1), {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "read",
             "input": {"a": [1], "system": "s", "tools": [2]}}]}),
        _middle_body(2, 2)], [False, True]),
    "search-string-in-a-member-after-the-history": ([
        _middle_body(0, 0), _middle_body(1, 1, metadata={"user_id": '],"system":"x"'}),
        _middle_body(2, 2, metadata={"user_id": '],"system":"x"'})], [True, True]),
    "escaped-quotes-before-the-search-string": ([
        _middle_body(0, 0),
        _with_item(_middle_body(1, 1), {"role": "user", "content": '\\"],\\"system\\":'}),
        _middle_body(2, 2)], [True, True]),
    "member-inserted-right-after-the-history": ([
        _middle_body(0, 0), _after_history(_middle_body(1, 1), "stream", True),
        _after_history(_middle_body(2, 2), "stream", True), _middle_body(3, 3)],
        [False, True, False]),
    # named twice among the decoded members: the last value in the first place, as loads
    # reads it; a stored line naming a member twice is not read from
    "member-after-the-history-named-twice": ([
        _middle_body(0, 0), _raw(_middle_body(1, 1), _SEARCHED, _SEARCHED + b',"tools":[]'),
        _raw(_middle_body(2, 2), _SEARCHED, b'"max_tokens":1,' + _SEARCHED),
        _middle_body(3, 3)], [True, False, False]),
    "member-before-the-history-named-again-after-it": ([
        _middle_body(0, 0), _raw(_middle_body(1, 1), _SEARCHED, _SEARCHED + b',"model":"x"'),
        _middle_body(2, 2)], [False, False]),
    "members-after-the-history-reordered": ([
        _middle_body(0, 0),
        {"model": "claude-sonnet-4-5", "messages": _history(1), "max_tokens": 1024,
         "tools": [{"name": "read", "input_schema": {"type": "object"}}],
         "system": f"{_SYSTEM}Time: 12:01"}, _middle_body(2, 2)], [False, False]),
    "member-after-the-history-holding-the-history-key": ([
        _middle_body(0, 0), _middle_body(1, 1, metadata={"messages": _history(1)}),
        _middle_body(2, 2)], [True, True]),
    "space-after-the-history": ([
        _middle_body(0, 0), _raw(_middle_body(1, 1), b'],"system"', b'] ,"system"'),
        _middle_body(2, 2)], [False, False]),
    "same-items-other-members-after": ([
        _middle_body(1, 0), _middle_body(1, 1), _middle_body(1, 1, stream=True),
        _middle_body(1, 1)], [True, True, True]),
    "numbers-written-otherwise-after-the-history": ([
        _middle_body(0, 0), _raw(_middle_body(1, 1), _SEARCHED, b'"max_tokens":1.024e3'),
        _raw(_middle_body(2, 2), _SEARCHED, b'"max_tokens":1024.0'), _middle_body(3, 3)],
        [True, False, True]),
    "history-first": ([
        {"messages": _history(t), "model": "m", "system": f"s{t}", "max_tokens": 1}
        for t in range(4)], [True, True, True]),
}


@pytest.mark.parametrize("case", sorted(_MIDDLE_CASES))
def test_history_end_found_by_the_next_member_name_prints_what_parsed_lines_print(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line is read from its stored line or not, as listed; a line read is the body
    ``loads`` returns (key order included) with :func:`segment_request`'s segments; lint
    prints what parsed lines print."""
    lines = [body if isinstance(body, bytes) else wire_json(body)
             for body in _MIDDLE_CASES[case][0]]
    lineages = LineageSegments(local_history=True)
    lineages.segment_captured("anthropic", loads(lines[0]), lines[0])
    read = []
    for line in lines[1:]:
        found = lineages.segment_reheaded("anthropic", line)
        read.append(found is not None)
        body = loads(line)
        if found is None:
            lineages.segment_captured("anthropic", body, line)
            continue
        assert found.segmented.body == body
        assert list(found.segmented.body) == list(body)
        assert found.segmented.data == segment_request("anthropic", body).data
    assert read == _MIDDLE_CASES[case][1]
    path = tmp_path / "capture.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    _headed_and_chained(path, monkeypatch)
