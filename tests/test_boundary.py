"""Tests for the turn-boundary classification (`_recording._boundary`) and its record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stableprompt import Recorder
from stableprompt._recording._boundary import turn_boundary
from stableprompt._recording._observer import Observation

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
        record = recorder.finish(pending, Observation(status_code=200,
                                                    body=json.dumps(response).encode()))
        assert record is not None
        seen.append(record.verdict_detail.get("turn_boundary"))
    assert seen == ["cross", "intra"]


def test_the_sdk_tail_message_does_not_hide_a_tool_result() -> None:
    """On the OpenAI formats the SDK's volatile tail is a last message of tail slots only: a
    tool-loop call rendered with a clock tail is still intra-turn, a first call after a user
    message still cross-turn (found on the openai demo ledger, where every call was cross)."""
    from stableprompt import PromptBuilder, Tool

    tool = Tool(name="f", description="d", parameters={"type": "object", "properties": {}})
    head = (PromptBuilder(tokenizer=None).system("You are careful.").tools([tool])
            .tail_slot("now").tail_slot("state").freeze())
    conversation = head.conversation()
    conversation.user("hi")
    first = conversation.render(tail={"now": "10:00", "state": "a\nb"})
    conversation.assistant(None, tool_calls=[{"id": "c1", "name": "f", "arguments": {}}])
    conversation.tool_result("c1", "ok")
    loop = conversation.render(tail={"now": "10:01", "state": "c"})
    for wire, render in (("openai-chat", "to_openai_chat"),
                         ("openai-responses", "to_openai_responses")):
        for prompt, expected in ((first, "cross"), (loop, "intra")):
            body = json.loads(getattr(prompt, render)(model="gpt-5.2").content)
            assert turn_boundary(wire, body) == expected, (wire, expected)
    plain = {"messages": [{"role": "user", "content": "<now>\n10:00\n</now>"}]}
    assert turn_boundary("openai-chat", plain) == "cross"  # a lone such message is the user's


def test_trailing_instructions_do_not_hide_the_turn() -> None:
    """A mid-conversation system (Anthropic) or developer (OpenAI) message appended after the
    turn's input is skipped: the call after a tool result is still "intra", after a user
    message "cross" (they were None, leaving such calls out of the turn split)."""
    tool_result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                "content": "ok"}]}
    anthropic_body = {"messages": [{"role": "user", "content": "q"}, {
        "role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                          "input": {}}]},
        tool_result, {"role": "system", "content": "be brief"}]}
    assert turn_boundary("anthropic", anthropic_body) == "intra"
    chat = {"messages": [{"role": "system", "content": "rules"}, {"role": "user", "content": "q"},
                         {"role": "developer", "content": "be brief"}]}
    assert turn_boundary("openai-chat", chat) == "cross"
    responses = {"input": [{"role": "developer", "content": "rules"},
                           {"type": "function_call_output", "call_id": "c", "output": "ok"},
                           {"role": "developer", "content": "be brief"}]}
    assert turn_boundary("openai-responses", responses) == "intra"


@pytest.mark.parametrize("to", ["gemini", "bedrock"])
def test_gemini_and_converse_requests_have_a_turn_boundary(to: str) -> None:
    """Rendered Gemini and Converse requests (a clock tail in the last user message) are
    cross-turn after a user message and intra-turn after tool results, and the recorder
    stores it; both gave no boundary, so the report's intra/cross split left every Gemini
    and Bedrock call out."""
    from stableprompt import PromptBuilder, Tool
    tool = Tool("get_weather", "Weather.", {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]})
    conv = PromptBuilder(tokenizer=None).system("S").tools([tool]).tail_slot("now") \
        .freeze().conversation()
    recorder = Recorder(tokenizer="bytes/4")
    seen = []
    for step in range(3):
        if step == 1:
            conv.assistant(None, tool_calls=[{"id": "c1", "name": "get_weather",
                                              "arguments": {"city": "Paris"}}])
            conv.tool_result("c1", "sunny")
        if step == 2:
            conv.assistant("Sunny.")
            conv.user("And tomorrow?")
        elif step == 0:
            conv.user("Weather?")
        rendered = conv.render(tail={"now": f"t{step}"})
        if to == "gemini":
            request = rendered.to_gemini(model="gemini-2.5-pro")
            host = "generativelanguage.googleapis.com"
            answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                                      "finishReason": "STOP"}],
                      "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1}}
        else:
            request = rendered.to_bedrock_converse(model_id="anthropic.claude-sonnet-4-6")
            host = "bedrock-runtime.us-east-1.amazonaws.com"
            answer = {"output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
                      "stopReason": "end_turn",
                      "usage": {"inputTokens": 10, "outputTokens": 1, "totalTokens": 11}}
        wire = "gemini" if to == "gemini" else "bedrock-converse"
        expected = ["cross", "intra", "cross"][step]
        assert turn_boundary(wire, request.body) == expected
        pending = recorder.start(request.path, {}, request.content, host=host)
        assert pending is not None
        record = recorder.finish(pending, Observation(status_code=200,
                                                    body=json.dumps(answer).encode()))
        assert record is not None and record.wire_format == wire
        seen.append(record.verdict_detail.get("turn_boundary"))
    assert seen == ["cross", "intra", "cross"]
