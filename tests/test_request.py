"""Tests for segmenting provider request bodies in cache order."""

from __future__ import annotations

from typing import Any

import pytest

from stableprompt import CaptureError
from stableprompt._wire._formats import detect, segment_request

ANTHROPIC: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "tools": [{"name": "b", "description": "B", "input_schema": {"type": "object"}}],
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ],
}


def test_anthropic_order_and_markers() -> None:
    """Params, tools, system and message blocks come in cache order; markers are stripped."""
    req = segment_request("anthropic", ANTHROPIC)
    assert [s.name for s in req.segments] == [
        "param:model", "tools[0]", "system[0]", "messages[0]", "messages[1].content[0]",
    ]
    system = req.segments[2]
    assert system.breakpoint == "5m"
    assert b"cache_control" not in req.data
    assert req.data[system.start:system.end] == b'{"type":"text","text":"You are terse."}'
    assert req.segments[1].label == "b"


def test_marker_does_not_change_fingerprint() -> None:
    """Moving a breakpoint does not change the request fingerprint (markers are not content)."""
    other = dict(ANTHROPIC, system=[{"type": "text", "text": "You are terse."}])
    assert segment_request("anthropic", other).fingerprint == segment_request(
        "anthropic", ANTHROPIC).fingerprint


def test_head_fingerprint_is_model_scoped() -> None:
    """The lineage (head fingerprint) changes with the model but not with new messages."""
    base = segment_request("anthropic", ANTHROPIC)
    longer = segment_request("anthropic", dict(ANTHROPIC, messages=[
        *ANTHROPIC["messages"], {"role": "user", "content": "more"}]))
    other_model = segment_request("anthropic", dict(ANTHROPIC, model="claude-opus-4-5"))
    assert base.head_fingerprint == longer.head_fingerprint
    assert base.head_fingerprint != other_model.head_fingerprint


def test_openai_chat_leading_system_is_system() -> None:
    """Leading system/developer messages are system segments; tools precede them."""
    body = {"model": "gpt-4.1", "tools": [{"type": "function", "function": {"name": "f"}}],
            "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                         {"role": "system", "content": "late"}]}
    req = segment_request("openai-chat", body)
    assert [(s.kind, s.name) for s in req.segments] == [
        ("param", "param:model"), ("tool", "tools[0]"), ("system", "messages[0]"),
        ("message", "messages[1]"), ("message", "messages[2]")]
    assert req.segments[1].label == "f"


def test_openai_responses_instructions_and_items() -> None:
    """Responses: instructions are system; input items become message segments."""
    body = {"model": "gpt-5.6", "instructions": "be brief",
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "q"}]},
                      {"type": "function_call_output", "call_id": "c1", "output": "42"}]}
    req = segment_request("openai-responses", body)
    assert [s.name for s in req.segments] == [
        "param:model", "instructions", "input[0].content[0]", "input[0].rest", "input[1].rest"]


def test_top_level_cache_control_marks_last_block() -> None:
    """Anthropic automatic caching puts the breakpoint on the last cacheable block."""
    req = segment_request("anthropic", dict(ANTHROPIC, cache_control={"type": "ephemeral",
                                                                       "ttl": "1h"}))
    assert req.segments[-1].breakpoint == "1h"


@pytest.mark.parametrize(
    ("fmt", "body", "code", "pointer"),
    [
        ("gemini-x", {"messages": []}, "capture-format", None),
        ("anthropic", {"model": "m"}, "capture-shape", "/messages"),
        ("anthropic", {"messages": "hi"}, "capture-shape", "/messages"),
        ("anthropic", {"messages": [1]}, "capture-shape", "/messages/0"),
        ("openai-responses", {"input": 3}, "capture-shape", "/input"),
        ("anthropic", {"messages": [{"role": "user", "content": float("nan")}]}, "capture-json",
         "/messages/0/content"),
    ],
)
def test_bad_bodies(fmt: str, body: dict[str, object], code: str, pointer: str | None) -> None:
    """Malformed bodies raise CaptureError with code and JSON pointer."""
    with pytest.raises(CaptureError) as info:
        segment_request(fmt, body)
    assert info.value.code == code
    assert info.value.pointer == pointer


def test_detect() -> None:
    """Wire formats are recognized from the path, or from the body alone."""
    assert detect({}, "/v1/messages") == "anthropic"
    assert detect({}, "/v1/chat/completions") == "openai-chat"
    assert detect({}, "/v1/responses") == "openai-responses"
    assert detect({}, "/anthropic/v1/messages") == "anthropic"
    assert detect({"messages": []}, "/v1/threads/t1/messages") is None
    assert detect({"messages": []}, "/v1/messages/count_tokens") is None
    assert detect(ANTHROPIC) == "anthropic"
    assert detect({"input": "x"}) == "openai-responses"
    assert detect({"messages": [{"role": "system", "content": "x"}]}) == "openai-chat"
