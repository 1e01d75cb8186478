"""``Conversation.add_response``: provider responses (dicts and official SDK objects) into the
history, tool calls validated in every provider shape (issue 14 item 1)."""

from __future__ import annotations

from typing import Any

import anthropic.types
import openai.types.chat
import openai.types.responses
import pytest

from stableprompt import HistoryError, IncompleteResponseWarning, PromptBuilder, ToolCall

TOOL = {"name": "get_invoice", "description": "Fetch an invoice.",
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}}


def conversation() -> Any:
    conv = PromptBuilder(system="You bill.", tools=[TOOL], tokenizer=None).freeze().conversation()
    conv.user("Show invoice 7.")
    return conv


ANTHROPIC: dict[str, Any] = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-5",
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
    "content": [{"type": "text", "text": "Looking it up."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_invoice",
                 "input": {"id": "7"}}]}
CHAT: dict[str, Any] = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-5.2",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "get_invoice", "arguments": '{"id": "7"}'}}]}}]}
RESPONSES: dict[str, Any] = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5.2",
    "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": [
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Looking it up.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_invoice",
         "arguments": '{"id": "7"}', "status": "completed"}]}
REASONING: dict[str, Any] = {"type": "reasoning", "id": "rs_1", "summary": [
    {"type": "summary_text", "text": "Need the invoice."}], "encrypted_content": "gAAAAB+/="}


@pytest.mark.parametrize("response", [
    ANTHROPIC, anthropic.types.Message.model_validate(ANTHROPIC),
    CHAT, openai.types.chat.ChatCompletion.model_validate(CHAT),
    RESPONSES, openai.types.responses.Response.model_validate(RESPONSES),
], ids=["anthropic", "anthropic-sdk", "chat", "chat-sdk", "responses", "responses-sdk"])
def test_a_response_becomes_the_assistant_turn(response: Any) -> None:
    conv = conversation()
    before = conv.render().to_anthropic(model="m", max_tokens=16)
    message = conv.add_response(response)
    call_id = "toolu_1" if "toolu_1" in str(response) else "call_1"
    assert message.tool_calls == (ToolCall(call_id, "get_invoice", {"id": "7"}),)
    assert conv.open_tool_calls == (call_id,)
    conv.tool_result(call_id, {"total": 12.5})
    after = conv.render().to_anthropic(model="m", max_tokens=16)
    # Append-only: the earlier request's segments are a prefix of the next one's.
    assert after.segments[: len(before.segments) - 1] == before.segments[:-1]


def test_the_same_turn_from_any_format_has_the_same_bytes() -> None:
    """Tool-call arguments parsed once into canonical form: Chat's JSON string and
    Anthropic's object give the same message bytes (ids aside)."""
    chat, responses = conversation(), conversation()
    a = chat.add_response(CHAT)
    b = responses.add_response({**RESPONSES, "output": RESPONSES["output"][1:]})
    assert a.data == b.data


def test_reasoning_modes() -> None:
    """``reasoning="error"`` refuses reasoning with a pointer at it, ``"drop"`` leaves it out
    of a turn without tool calls, and an unknown mode is a typed error."""
    thinking = {**ANTHROPIC, "stop_reason": "end_turn", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"}, ANTHROPIC["content"][0]]}
    with pytest.raises(HistoryError) as info:
        conversation().add_response(thinking, reasoning="error")
    assert info.value.code == "history-reasoning" and info.value.pointer == "/content/0"
    message = conversation().add_response(thinking, reasoning="drop")
    assert message.to_dict()["content"] == [{"text": "Looking it up.", "type": "text"}]
    chat = {**CHAT, "choices": [{**CHAT["choices"][0], "message": {
        **CHAT["choices"][0]["message"], "reasoning_content": "first, ..."}}]}
    with pytest.raises(HistoryError, match="reasoning") as info:
        conversation().add_response(chat, reasoning="error")
    assert info.value.pointer == "/choices/0/message/reasoning_content"
    with pytest.raises(HistoryError, match="'keep', 'drop', 'error'") as info:
        conversation().add_response(CHAT, reasoning="maybe")
    assert (info.value.code, info.value.pointer) == ("history-type", "/reasoning")


def test_dropping_reasoning_of_a_tool_calling_turn_is_refused() -> None:
    """Anthropic needs the thinking of the turn that called tools back with the results, and
    so does a Responses reasoning model: ``drop`` there raises, naming the block and the
    documented rule."""
    thinking = {**ANTHROPIC, "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"}, *ANTHROPIC["content"]]}
    with pytest.raises(HistoryError, match="extended-thinking") as info:
        conversation().add_response(thinking, reasoning="drop")
    assert (info.value.code, info.value.pointer) == ("history-reasoning-required", "/content/0")
    responses = {**RESPONSES, "output": [REASONING, *RESPONSES["output"]]}
    with pytest.raises(HistoryError) as info:
        conversation().add_response(responses, reasoning="drop")
    assert (info.value.code, info.value.pointer) == ("history-reasoning-required", "/output/0")


@pytest.mark.parametrize(("response", "code", "pointer"), [
    ({**CHAT, "choices": [CHAT["choices"][0], CHAT["choices"][0]]}, "history-choices",
     "/choices"),
    ({**ANTHROPIC, "role": "user"}, "history-response", "/role"),
    ({**CHAT, "choices": [{"message": {"role": "user", "content": "x"}}]}, "history-response",
     "/choices/0/message/role"),
    ({**RESPONSES, "output": [{**RESPONSES["output"][0], "role": "user"}]}, "history-response",
     "/output/0/role"),
    ({**ANTHROPIC, "content": [{"type": "text", "text": 7}]}, "history-response",
     "/content/0/text"),
    ({**RESPONSES, "output": [{"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": None}]}]}, "history-response", "/output/0/content/0/text"),
    ({**ANTHROPIC, "content": [ANTHROPIC["content"][0],
                               {**ANTHROPIC["content"][1], "input": "[1]"}]},
     "history-tool-call", "/content/1/input"),
    ({**RESPONSES, "output": [{**RESPONSES["output"][1], "arguments": "{bad"}]},
     "history-tool-call", "/output/0/arguments"),
    ({**ANTHROPIC, "content": [{**ANTHROPIC["content"][1], "name": "nope"}]},
     "history-unknown-tool", "/content/0/name"),
    ({**CHAT, "choices": [{"message": {"content": None, "tool_calls": [
        {"id": "", "type": "function", "function": {"name": "get_invoice"}}]}}]},
     "history-tool-call", "/choices/0/message/tool_calls/0/id"),
], ids=["choices", "anthropic-user", "chat-user", "responses-user", "text-int", "text-none",
        "input-not-object", "responses-args", "unknown-tool", "empty-id"])
def test_review_findings_are_typed_errors_at_response_paths(response: Any, code: str,
                                                            pointer: str) -> None:
    """Extra choices, a non-assistant role, a non-str text, bad arguments, unknown tools and
    empty ids raise typed errors whose pointer is a path in the response."""
    with pytest.raises(HistoryError) as info:
        conversation().add_response(response)
    assert (info.value.code, info.value.pointer) == (code, pointer)
    if code == "history-response" and pointer.endswith("/text"):
        assert "must be a string" in info.value.message


def test_choice_picks_one_of_several_choices() -> None:
    """``choice=`` says which of n > 1 choices continues the conversation."""
    other = {"index": 1, "finish_reason": "stop", "message": {"role": "assistant",
                                                              "content": "No tool."}}
    message = conversation().add_response({**CHAT, "choices": [CHAT["choices"][0], other]},
                                          choice=1)
    assert message.text == "No tool." and message.tool_calls == ()
    with pytest.raises(HistoryError) as info:
        conversation().add_response(CHAT, choice=3)
    assert info.value.pointer == "/choices/3/message"
    with pytest.raises(HistoryError) as info:
        conversation().add_response(ANTHROPIC, choice=1)
    assert info.value.code == "history-choices"


@pytest.mark.parametrize(("response", "pointer"), [
    ({**ANTHROPIC, "stop_reason": "max_tokens"}, "/stop_reason"),
    ({**CHAT, "choices": [{**CHAT["choices"][0], "finish_reason": "length"}]},
     "/choices/0/finish_reason"),
    ({**RESPONSES, "status": "incomplete",
      "incomplete_details": {"reason": "max_output_tokens"}}, "/status"),
], ids=["anthropic", "chat", "responses"])
def test_a_cut_short_response_warns(response: Any, pointer: str) -> None:
    """``max_tokens`` / ``length`` / ``incomplete`` responses are added with a typed warning
    naming the field."""
    with pytest.warns(IncompleteResponseWarning) as caught:
        conversation().add_response(response)
    warning = caught[0].message
    assert isinstance(warning, IncompleteResponseWarning)
    assert warning.code == "history-incomplete" and warning.pointer == pointer


def test_an_sdk_object_that_cannot_be_dumped_is_a_typed_error() -> None:
    """A response object whose ``model_dump`` raises gives ``history-response``, chained."""
    class Broken:
        def model_dump(self, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

    with pytest.raises(HistoryError, match=r"Broken.*boom") as info:
        conversation().add_response(Broken())
    assert info.value.code == "history-response"
    assert isinstance(info.value.__cause__, RuntimeError)


@pytest.mark.parametrize(("response", "code", "pointer"), [
    ({"nothing": 1}, "history-response", None),
    ({"choices": []}, "history-response", "/choices/0/message"),
    ({"choices": {}}, "history-response", "/choices"),
    ({"output": [{"type": "web_search_call"}]}, "history-response", "/output/0"),
    ({"content": [{"type": "image"}]}, "history-response", "/content/0"),
    ({"content": [{"type": "tool_use", "id": "t", "name": "get_invoice", "args": {}}]},
     "history-tool-call", "/content/0/args"),
    ({"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get_invoice",
                                                      "arguments": "{not json"}}]}}]},
     "history-tool-call", "/choices/0/message/tool_calls/0/function/arguments"),
], ids=["unknown", "no-choice", "choices-object", "unknown-item", "unknown-block",
        "typo-args", "bad-json"])
def test_malformed_responses_name_what_and_where(response: Any, code: str,
                                                 pointer: str | None) -> None:
    with pytest.raises(HistoryError) as info:
        conversation().add_response(response)
    assert info.value.code == code
    assert info.value.pointer == pointer
    with pytest.raises(HistoryError, match="SDK response"):
        conversation().add_response("text")


def test_tool_call_dicts_are_validated_in_every_shape() -> None:
    conv = conversation()
    with pytest.raises(HistoryError) as info:
        conv.assistant(tool_calls=[{"id": "c1", "name": "get_invoice", "args": {"id": "7"}}])
    assert info.value.code == "history-tool-call" and "'arguments'" in str(info.value)
    with pytest.raises(HistoryError) as info:
        conv.assistant(tool_calls=[{"id": "c1", "name": "get_invoice", "arguments": {},
                                    "extra": 1}])
    assert info.value.pointer == "/tool_calls/0/extra"
    with pytest.raises(HistoryError) as info:
        conv.assistant(tool_calls=[{"id": "c1", "type": "function",
                                    "function": {"name": "get_invoice", "args": "{}"}}])
    assert info.value.pointer == "/tool_calls/0/function/args"
    message = conv.assistant(tool_calls=[
        {"id": "c1", "type": "function",
         "function": {"name": "get_invoice", "arguments": '{"id": "7"}'}},
        {"type": "tool_use", "id": "c2", "name": "get_invoice", "input": {"id": "8"}}])
    assert [c.arguments for c in message.tool_calls] == [{"id": "7"}, {"id": "8"}]


WEATHER_TURN: dict[str, Any] = {
    "id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [{"type": "tool_use", "id": "t", "name": "get_invoice", "args": {"id": "7"}}],
    "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}}


@pytest.mark.parametrize(("response", "pointer", "words"), [
    (WEATHER_TURN, "/content/0/args",
     ["unknown key 'args' (did you mean 'input'?)", "tool_use block needs 'input'",
      "got keys ['args', 'id', 'name', 'type']"]),
    ({**WEATHER_TURN, "content": [{"type": "tool_use", "id": "t", "name": "get_invoice",
                                   "arguments": {}}]}, "/content/0/arguments",
     ["unknown key 'arguments' (did you mean 'input'?)", "tool_use block needs 'input'"]),
    ({**RESPONSES, "output": [{"type": "function_call", "id": "fc", "call_id": "c",
                               "name": "get_invoice", "args": "{}"}]}, "/output/0/args",
     ["unknown key 'args' (did you mean 'arguments'?)", "function_call item needs 'arguments'",
      "got keys ['args', 'call_id', 'id', 'name', 'type']"]),
    ({"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get_invoice", "args": "{}"}}]}}]},
     "/choices/0/message/tool_calls/0/function/args",
     ["unknown key 'args' (did you mean 'arguments'?)", "got keys ['args', 'name']"]),
], ids=["anthropic-args", "anthropic-arguments", "responses-args", "chat-args"])
def test_a_tool_call_typo_names_the_shape_the_key_and_every_key_given(
        response: dict[str, Any], pointer: str, words: list[str]) -> None:
    """A typo in a response's tool call is read in the response format's shape: the error
    names the key, the field it was meant as and every key given, at the response path."""
    with pytest.raises(HistoryError) as info:
        conversation().add_response(response)
    assert (info.value.code, info.value.pointer) == ("history-tool-call", pointer)
    for word in words:
        assert word in info.value.message


def test_a_providers_extra_tool_call_fields_are_ignored() -> None:
    """Fields the provider adds to a complete call (``caller``, ``namespace``) are not typos."""
    anthropic_turn = {**ANTHROPIC, "content": [{**ANTHROPIC["content"][1],
                                                "caller": {"type": "direct"}}]}
    responses_turn = {**RESPONSES, "output": [{**RESPONSES["output"][1], "namespace": None,
                                               "caller": {"type": "direct"}}]}
    for response in (anthropic_turn, responses_turn):
        message = conversation().add_response(response)
        assert [c.arguments for c in message.tool_calls] == [{"id": "7"}]


def test_an_incomplete_tool_call_dict_lists_what_is_missing() -> None:
    """A dict with no arguments field and no typo names every missing field."""
    with pytest.raises(HistoryError) as info:
        conversation().assistant(tool_calls=[{"name": "get_invoice"}])
    assert info.value.pointer == "/tool_calls/0"
    assert "needs 'arguments', 'id'" in info.value.message
