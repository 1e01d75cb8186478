"""Tests for the turn-boundary classification (`_recording._boundary`) and its record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stableprompt import Recorder
from stableprompt._recording._boundary import turn_boundary

TOOL_RESULT = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}


@pytest.mark.parametrize(("wire", "body", "expected"), [
    ("anthropic", {"messages": [{"role": "user", "content": "hi"}]}, "cross"),
    ("anthropic", {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]},
     "cross"),
    ("anthropic", {"messages": [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "t"},
                                {"role": "user", "content": [TOOL_RESULT]}]}, "intra"),
    ("anthropic", {"messages": [{"role": "user", "content": [TOOL_RESULT]},
                                {"role": "assistant", "content": "prefill"}]}, "intra"),
    ("anthropic", {"messages": []}, None),
    ("anthropic", {}, None),
    ("openai-chat", {"messages": [{"role": "system", "content": "s"},
                                  {"role": "user", "content": "q"}]}, "cross"),
    ("openai-chat", {"messages": [{"role": "user", "content": "q"},
                                  {"role": "assistant", "tool_calls": []},
                                  {"role": "tool", "tool_call_id": "c", "content": "r"}]},
     "intra"),
    ("openai-chat", {"messages": [{"role": "system", "content": "s"}]}, None),
    ("openai-responses", {"input": "q"}, "cross"),
    ("openai-responses", {"input": [{"role": "user", "content": "q"}]}, "cross"),
    ("openai-responses", {"input": [{"role": "user", "content": "q"},
                                    {"type": "function_call", "call_id": "c"},
                                    {"type": "function_call_output", "call_id": "c",
                                     "output": "r"}]}, "intra"),
    ("gemini", {"contents": []}, None),
])
def test_turn_boundary_reads_the_last_input_message(wire: str, body: dict[str, Any],
                                                    expected: str | None) -> None:
    """A request after a tool result is intra-turn, after a user message cross-turn; trailing
    assistant prefill is skipped; other shapes are unknown."""
    assert turn_boundary(wire, body) == expected


def test_recorder_stores_the_turn_boundary() -> None:
    """The recorder writes the boundary into verdict_detail["turn_boundary"]."""
    recorder = Recorder(tokenizer="bytes/4")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q"}]
    seen = []
    for step in range(2):
        if step:
            messages += [{"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {"role": "user", "content": [TOOL_RESULT]}]
        body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5,
                           "messages": messages}).encode()
        pending = recorder.start("/v1/messages", {}, body, host="api.anthropic.com")
        assert pending is not None
        response = {"id": f"m{step}", "type": "message", "role": "assistant", "content": [],
                    "usage": {"input_tokens": 10, "output_tokens": 1}}
        record = recorder.finish(pending, status_code=200, body=json.dumps(response).encode())
        assert record is not None
        seen.append(record.verdict_detail.get("turn_boundary"))
    assert seen == ["cross", "intra"]
