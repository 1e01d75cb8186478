"""Reasoning content kept by ``add_response``: replayed byte-for-byte, in place, to the format
that produced it; refused by every other format (issue 14 item 2)."""

from __future__ import annotations

import re
from typing import Any

import anthropic.types
import openai.types.responses
import pytest

from stableprompt import HistoryError, PromptBuilder, canonical_json, diff
from stableprompt._policy import REASONING_RULES, reasoning_rule

TOOL = {"name": "get_invoice", "description": "Fetch an invoice.",
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}}
THINKING = {"type": "thinking", "thinking": "The user wants invoice 7.\n\nCall the tool.",
            "signature": "EqQBCkYIBxgCKkB/+=="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
ANTHROPIC: dict[str, Any] = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-5",
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
    "content": [THINKING, REDACTED, {"type": "text", "text": "Looking it up."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_invoice",
                 "input": {"id": "7"}}]}
REASONING = {"id": "rs_1", "type": "reasoning", "summary": [
    {"type": "summary_text", "text": "Need the invoice."}], "encrypted_content": "gAAAAB+/="}
RESPONSES: dict[str, Any] = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5.2",
    "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": [REASONING,
               {"type": "function_call", "id": "fc_1", "call_id": "call_1",
                "name": "get_invoice", "arguments": '{"id": "7"}', "status": "completed"}]}


def conversation() -> Any:
    conv = PromptBuilder(system="You bill.", tools=[TOOL], tokenizer=None).freeze().conversation()
    conv.user("Show invoice 7.")
    return conv


@pytest.mark.parametrize("sdk", [False, True], ids=["dict", "sdk"])
def test_anthropic_thinking_is_replayed_exactly_in_place(sdk: bool) -> None:
    """Thinking (with its signature) and redacted_thinking blocks are kept by default and sent
    back in the same position, with the same values, on every later request."""
    conv = conversation()
    response = anthropic.types.Message.model_validate(ANTHROPIC) if sdk else ANTHROPIC
    conv.add_response(response)
    conv.tool_result("toolu_1", "12.50 EUR")
    first = conv.render().to_anthropic(model="claude-sonnet-5", max_tokens=64)
    assistant = first.body["messages"][1]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == [
        "thinking", "redacted_thinking", "text", "tool_use"]
    assert assistant["content"][0] == THINKING and assistant["content"][1] == REDACTED
    assert canonical_json(THINKING) in first.content  # the block's bytes, unchanged
    conv.user("And invoice 8?")
    second = conv.render().to_anthropic(model="claude-sonnet-5", max_tokens=64)
    assert second.body["messages"][1] == assistant
    assert diff(first, second) is None


@pytest.mark.parametrize("sdk", [False, True], ids=["dict", "sdk"])
def test_responses_reasoning_items_are_replayed_exactly_in_place(sdk: bool) -> None:
    """A Responses reasoning item (id, summary, encrypted_content) is replayed as an input
    item right before the function call it came with; the SDK object gives the same bytes."""
    conv = conversation()
    response = openai.types.responses.Response.model_validate(RESPONSES) if sdk else RESPONSES
    message = conv.add_response(response)
    conv.tool_result("call_1", "12.50 EUR")
    body = conv.render().to_openai_responses(model="gpt-5.2").body
    types = [item.get("type") for item in body["input"]]
    assert types == ["message", "message", "reasoning", "function_call", "function_call_output"]
    assert body["input"][2] == REASONING
    plain = conversation().add_response(RESPONSES)
    assert message.data == plain.data


def test_chat_reasoning_content_is_replayed_on_its_message() -> None:
    """A Chat ``reasoning_content`` field (DeepSeek thinking mode) goes back on the assistant
    message it came with."""
    conv = conversation()
    conv.add_response({"choices": [{"finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "reasoning_content": "Call the tool.",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_invoice", "arguments": '{"id":"7"}'}}]}}]})
    conv.tool_result("call_1", "12.50 EUR")
    message = conv.render().to_openai_chat(model="deepseek-chat").body["messages"][2]
    assert message["reasoning_content"] == "Call the tool."
    assert message["tool_calls"][0]["id"] == "call_1"


@pytest.mark.parametrize(("response", "render"), [
    (ANTHROPIC, lambda p: p.to_openai_chat(model="gpt-5.2")),
    (ANTHROPIC, lambda p: p.to_openai_responses(model="gpt-5.2")),
    (RESPONSES, lambda p: p.to_anthropic(model="claude-sonnet-5", max_tokens=64)),
    (RESPONSES, lambda p: p.to_openai_chat(model="gpt-5.2")),
], ids=["anthropic-to-chat", "anthropic-to-responses", "responses-to-anthropic",
        "responses-to-chat"])
def test_reasoning_is_never_rendered_to_another_format(response: Any, render: Any) -> None:
    """Another provider cannot verify a signature or decrypt a reasoning item: the render
    raises a typed error naming the message index (never a silent drop)."""
    conv = conversation()
    conv.add_response(response)
    conv.tool_result(conv.open_tool_calls[0], "12.50 EUR")
    with pytest.raises(HistoryError) as info:
        render(conv.render())
    assert info.value.code == "history-reasoning-format"
    assert info.value.segment == "messages[1]"
    assert info.value.pointer == "/messages/1/content/0"
    assert re.search(r"which an? \S+ request cannot", info.value.message)
    assert "which a openai" not in info.value.message  # the article fits the format name


def test_kept_reasoning_survives_export_and_resume() -> None:
    """Exported history keeps the reasoning bytes; a resumed conversation renders the same."""
    conv = conversation()
    conv.add_response(ANTHROPIC)
    conv.tool_result("toolu_1", "12.50 EUR")
    resumed = conv.head.resume(conv.export())
    request = {"model": "claude-sonnet-5", "max_tokens": 64}
    assert (resumed.render().to_anthropic(**request).content
            == conv.render().to_anthropic(**request).content)


def test_a_breakpoint_never_lands_on_a_thinking_block() -> None:
    """Thinking blocks cannot carry ``cache_control``: a breakpoint for a message that ends
    in one goes on its last other block."""
    conv = conversation()
    conv.add_response({**ANTHROPIC, "stop_reason": "end_turn", "content": [
        {"type": "text", "text": "Done."}, THINKING]})
    body = conv.render().to_anthropic(model="claude-sonnet-5", max_tokens=64).body
    last = body["messages"][-1]["content"]
    assert "cache_control" in last[0] and "cache_control" not in last[1]


def test_reasoning_rules_are_sourced_data() -> None:
    """The drop rules per format are data with a source URL and a date."""
    assert {r.wire_format for r in REASONING_RULES} == {
        "anthropic", "openai-responses", "openai-chat", "gemini", "bedrock-converse"}
    for rule in REASONING_RULES:
        assert rule.source.startswith("https://") and rule.as_of
    assert reasoning_rule("anthropic").required_in_tool_turn
    assert not reasoning_rule("gemini").required_in_tool_turn  # the signature is what counts
    assert reasoning_rule("bedrock-converse").required_in_tool_turn
    with pytest.raises(LookupError):
        reasoning_rule("llama-cpp")


@pytest.mark.parametrize("fmt", ["anthropic", "openai-responses"])
def test_incremental_fingerprints_cover_reasoning(fmt: str) -> None:
    """The renderer's incrementally chained fingerprint of a history with kept reasoning is
    the one the request segmenter (recorder, lint) computes from the body."""
    from stableprompt import segment_request

    conv = conversation()
    conv.add_response(ANTHROPIC if fmt == "anthropic" else RESPONSES)
    conv.tool_result(conv.open_tool_calls[0], "12.50 EUR")
    prompt = conv.render()
    request = (prompt.to_anthropic(model="claude-sonnet-5", max_tokens=64) if fmt == "anthropic"
               else prompt.to_openai_responses(model="gpt-5.2"))
    segmented = segment_request(fmt, request.body)
    assert (request.fingerprint, request.head_fingerprint) == (
        segmented.fingerprint, segmented.head_fingerprint)
