"""Tests for ``_wire.llama_cpp_requests``: llama-server's Anthropic and Responses conversions.

Offline tests pin the port to the C++ (``tools/server/server-chat.cpp`` of llama.cpp 0c1e570):
keys, order, joins, drops and errors. Tests marked ``real_engine`` check it against a running
llama-server (conftest ``llama_url``): the tokens of ``/apply-template`` of the port equal
the engine's own ``/v1/messages/count_tokens`` and ``/v1/responses/input_tokens``, which
convert server-side, and bodies the port rejects are rejected by the engine with the same
message."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from stableprompt import CanonicalizationError, EngineRequestError
from stableprompt._wire.llama_cpp_requests import normalize_billing_header, to_chat_completions

# --- BFCL-like shapes ----------------------------------------------------------------------

TOOLS: list[dict[str, Any]] = [
    {"name": "get_weather", "description": "Current weather for a city.",
     "input_schema": {"type": "object", "properties": {
         "city": {"type": "string", "description": "City name, e.g. Paris"},
         "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
         "required": ["city"]}},
    {"name": "search_flights", "description": "Search flights between two airports.",
     "input_schema": {"type": "object", "properties": {
         "origin": {"type": "string"}, "destination": {"type": "string"},
         "date": {"type": "string", "format": "date"},
         "passengers": {"type": "integer", "minimum": 1},
         "filters": {"type": "object", "properties": {
             "max_price": {"type": "number"}, "nonstop": {"type": "boolean"}}}},
         "required": ["origin", "destination", "date"]}},
    {"name": "calculate", "description": "Evaluate an arithmetic expression.",
     "input_schema": {"type": "object", "properties": {"expression": {"type": "string"}},
                      "required": ["expression"]}},
]
SYSTEM = "You are a travel assistant. Use the tools when they help; answer briefly."


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def _result(call_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


ANTHROPIC_TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in Paris and in Rome today?"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Two cities: two calls.", "signature": "sig"},
        {"type": "text", "text": "Checking both cities."},
        _call("toolu_01", "get_weather", {"city": "Paris", "unit": "celsius"}),
        _call("toolu_02", "get_weather", {"city": "Rome"})]},
    {"role": "user", "content": [
        _result("toolu_01", "18 degrees, sunny"),
        _result("toolu_02", [{"type": "text", "text": "24 degrees"},
                             {"type": "text", "text": ", clear", "cache_control":
                              {"type": "ephemeral"}}])]},
    {"role": "assistant", "content": [{"type": "text", "text": "Paris 18°C sunny, Rome 24°C."}]},
    {"role": "user", "content": [
        {"type": "text", "text": "Find me a nonstop flight from CDG to FCO on 2026-12-24"},
        {"type": "text", "text": " for 2 people under 250.5 euros.",
         "cache_control": {"type": "ephemeral"}}]},
    {"role": "assistant", "content": [_call("toolu_03", "search_flights", {
        "origin": "CDG", "destination": "FCO", "date": "2026-12-24", "passengers": 2,
        "filters": {"max_price": 250.5, "nonstop": True}})]},
    {"role": "user", "content": [_result("toolu_03", [
        {"type": "text", "text": "[{\"flight\": \"AZ317\", \"price\": 189.99}]"}])]},
    {"role": "assistant", "content": "AZ317 at 189.99 euros is the only nonstop option."},
    {"role": "user", "content": "What is 189.99 * 2 + 1e15?"},
    {"role": "assistant", "content": [_call("toolu_04", "calculate",
                                            {"expression": "189.99 * 2 + 1e15", "x": 1e15})]},
    {"role": "user", "content": [_result("toolu_04", "1000000000000379.98"),
                                 {"type": "text", "text": "Thanks!"}]},
]


def anthropic_bodies() -> list[dict[str, Any]]:
    """Anthropic bodies of a growing session (each state a client may send: ending with a
    user turn, or an assistant text the server continues; an assistant tool call last is a
    400 there) and its variants (system forms, tool choice, thinking options, empty
    results)."""
    bodies: list[dict[str, Any]] = []
    for n in (1, 3, 4, 5, 7, 8, 9, 11):
        bodies.append({"model": "m", "max_tokens": 512, "system": SYSTEM, "tools": TOOLS,
                       "messages": ANTHROPIC_TURNS[:n]})
    base = {"model": "m", "max_tokens": 256, "messages": ANTHROPIC_TURNS[:4]}
    bodies += [
        {**base, "system": [{"type": "text", "text": SYSTEM, "cache_control":
                             {"type": "ephemeral"}}, {"type": "text", "text": " Be kind."}]},
        {**base, "tools": TOOLS, "tool_choice": {"type": "any"}},
        {**base, "tools": TOOLS, "tool_choice": {"type": "tool", "name": "calculate"}},
        {**base, "tools": TOOLS, "tool_choice": {"type": "none"}},
        {**base, "system": "x-anthropic-billing-header: cc_version=2.1; cch=a5145;Hello."},
        {**base, "thinking": {"type": "enabled", "budget_tokens": 1024}, "temperature": 0.2,
         "stop_sequences": ["</answer>"], "metadata": {"user_id": "u-1"}},
        {"model": "m", "max_tokens": 64, "messages": [
            {"role": "user", "content": [_result("t9", None), {"type": "text", "text": "?"}]}]},
        {"model": "m", "max_tokens": 64, "tools": TOOLS[:1], "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": [_call("t1", "get_weather", {"city": "Oslo"})]},
            {"role": "user", "content": [_result("t1", [])]}]},
        {"model": "m", "messages": [{"role": "user", "content": "<|im_end|> literal"}]},
    ]
    return bodies


RESPONSES_TOOLS = [{"type": "function", "name": t["name"], "description": t["description"],
                    "parameters": t["input_schema"]} for t in TOOLS]
RESPONSES_INPUT: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in Paris and in Rome today?"},
    {"type": "reasoning", "id": "rs_1", "summary": [],
     "content": [{"type": "reasoning_text", "text": "Two cities: two calls."}]},
    {"type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Checking both cities.", "annotations": []}]},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather",
     "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"},
    {"type": "function_call", "call_id": "call_2", "name": "get_weather",
     "arguments": "{\"city\":\"Rome\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "18 degrees, sunny"},
    {"type": "function_call_output", "call_id": "call_2",
     "output": [{"type": "input_text", "text": "24 degrees, clear"}]},
    {"type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "Paris 18°C sunny, Rome 24°C."}]},
    {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Find me a nonstop flight from CDG to FCO"},
        {"type": "input_text", "text": " on 2026-12-24 for 2 people."}]},
    {"type": "function_call", "call_id": "call_3", "name": "search_flights",
     "arguments": "{\"origin\":\"CDG\",\"destination\":\"FCO\",\"date\":\"2026-12-24\","
                  "\"passengers\":2,\"filters\":{\"nonstop\":true}}"},
    {"type": "function_call_output", "call_id": "call_3",
     "output": "[{\"flight\": \"AZ317\", \"price\": 189.99}]"},
    {"role": "developer", "content": "Prices are in euros."},
]


def responses_bodies() -> list[dict[str, Any]]:
    """Responses bodies of a growing session (as :func:`anthropic_bodies`) and variants."""
    bodies: list[dict[str, Any]] = []
    for n in (1, 2, 3, 6, 7, 8, 9, 11, 12):
        bodies.append({"model": "m", "instructions": SYSTEM, "tools": RESPONSES_TOOLS,
                       "input": RESPONSES_INPUT[:n]})
    bodies += [
        {"model": "m", "input": "Just a string input."},
        {"model": "m", "instructions": SYSTEM, "input": RESPONSES_INPUT[:8],
         "tools": [*RESPONSES_TOOLS, {"type": "web_search"}], "tool_choice": "required",
         "max_output_tokens": 300, "reasoning": {"effort": "low"}, "temperature": 0.1},
        {"model": "m", "input": RESPONSES_INPUT[:3], "tools": [{"type": "web_search"}],
         "parallel_tool_calls": False, "instructions": None},
    ]
    return bodies


# --- Anthropic -----------------------------------------------------------------------------

def test_anthropic_session_converts_as_the_server_does() -> None:
    """System first; thinking, text and tool_use of one turn become one assistant message;
    tool results follow as tool messages; a trailing user text comes before them."""
    chat = to_chat_completions("anthropic", anthropic_bodies()[7])
    assert list(chat) == ["messages", "tools", "max_tokens"]
    messages = chat["messages"]
    assert messages[0] == {"role": "system", "content": SYSTEM}
    assert messages[2] == {
        "role": "assistant", "content": [{"type": "text", "text": "Checking both cities."}],
        "tool_calls": [
            {"id": "toolu_01", "type": "function", "function": {
                "name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius"}'}},
            {"id": "toolu_02", "type": "function", "function": {
                "name": "get_weather", "arguments": '{"city":"Rome"}'}}],
        "reasoning_content": "Two cities: two calls."}
    assert messages[3:5] == [
        {"role": "tool", "tool_call_id": "toolu_01", "content": "18 degrees, sunny"},
        {"role": "tool", "tool_call_id": "toolu_02", "content": "24 degrees, clear"}]
    assert messages[-2:] == [
        {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
        {"role": "tool", "tool_call_id": "toolu_04", "content": "1000000000000379.98"}]
    assert chat["tools"][1] == {"type": "function", "function": {
        "name": "search_flights", "description": "Search flights between two airports.",
        "parameters": TOOLS[1]["input_schema"]}}
    assert chat["max_tokens"] == 512


def test_text_blocks_are_kept_as_they_are_with_cache_control() -> None:
    """Multi-block user text stays a list of parts; the C++ copies each text block whole
    (the server's message parser then reads only type and text)."""
    chat = to_chat_completions("anthropic", anthropic_bodies()[3])
    assert chat["messages"][-1]["content"] == ANTHROPIC_TURNS[4]["content"]


def test_tool_use_arguments_are_nlohmann_dumps_and_alone_give_empty_content() -> None:
    """A tool_use-only turn has content ""; arguments keep key order and nlohmann's number
    format (1e15 -> 1e+15, 250.5, true)."""
    messages = to_chat_completions("anthropic", anthropic_bodies()[7])["messages"]
    flights = next(m for m in messages if m.get("tool_calls", [{}])[0].get("id") == "toolu_03")
    assert flights["content"] == ""
    assert flights["tool_calls"][0]["function"]["arguments"] == (
        '{"origin":"CDG","destination":"FCO","date":"2026-12-24","passengers":2,'
        '"filters":{"max_price":250.5,"nonstop":true}}')
    calc = next(m for m in messages if m.get("tool_calls", [{}])[0].get("id") == "toolu_04")
    assert calc["tool_calls"][0]["function"]["arguments"] == (
        '{"expression":"189.99 * 2 + 1e15","x":1e+15}')


def test_tool_use_without_input_and_odd_inputs() -> None:
    """A missing or null input dumps as {}, any other value as itself."""
    body = {"messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "a", "name": "f"},
        {"type": "tool_use", "id": "b", "name": "f", "input": None},
        {"type": "tool_use", "name": 3, "input": "text"}]}]}
    calls = to_chat_completions("anthropic", body)["messages"][0]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", "{}", '"text"']
    assert calls[2]["id"] == "" and calls[2]["function"]["name"] == ""


def test_system_forms() -> None:
    """Text blocks join with nothing between (other block types skipped); a system that is
    neither string nor list is an empty system message; null is no system."""
    def system(value: Any) -> Any:
        return to_chat_completions("anthropic", {"system": value, "messages": []})["messages"]
    assert system([{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}},
                   {"type": "image", "text": "skipped"}, {"type": "text", "text": " B"},
                   {"type": "text"}]) == [{"role": "system", "content": "A B"}]
    assert system(7) == [{"role": "system", "content": ""}]
    assert system(None) == []


@pytest.mark.parametrize(("text", "expected"), [
    ("x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=a5145;You",
     "x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=fffff;You"),
    ("x-anthropic-billing-header: cch=abc;", "x-anthropic-billing-header: cch=abc;"),
    ("x-anthropic-billing-header: cch=abcde", "x-anthropic-billing-header: cch=abcde"),
    ("You are Claude. cch=a5145;", "You are Claude. cch=a5145;"),
])
def test_billing_header_stamp_is_blanked(text: str, expected: str) -> None:
    """Only a header-led text with five bytes then ';' after cch= is edited."""
    assert normalize_billing_header(text) == expected


def test_billing_header_in_system_blocks() -> None:
    """Each system block is normalized before joining."""
    body = {"system": [{"type": "text", "text": "x-anthropic-billing-header: cch=12345;A"},
                       {"type": "text", "text": "x-anthropic-billing-header: cch=67890;B"}],
            "messages": []}
    assert to_chat_completions("anthropic", body)["messages"][0]["content"] == (
        "x-anthropic-billing-header: cch=fffff;Ax-anthropic-billing-header: cch=fffff;B")


def test_images_become_image_url_parts() -> None:
    """base64 (default media type image/jpeg) becomes a data URL, url stays, other sources
    are dropped."""
    body = {"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "AAA"}},
        {"type": "image", "source": {"type": "base64", "data": "BBB"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
        {"type": "image", "source": {"type": "file", "file_id": "f"}},
        {"type": "document", "source": {}}]}]}
    parts = to_chat_completions("anthropic", body)["messages"][0]["content"]
    assert parts == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,BBB"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]


def test_tool_results_with_images_keep_parts() -> None:
    """A result with an image keeps text and image parts; text-only joins; none is ""."""
    body = {"messages": [{"role": "user", "content": [
        _result("a", [{"type": "text", "text": "see"},
                      {"type": "image", "source": {"type": "url", "url": "u"}}]),
        _result("b", [{"type": "image", "source": {"type": "other"}}]),
        _result("c", {"unexpected": True}),
        {"type": "tool_result"}]}]}
    messages = to_chat_completions("anthropic", body)["messages"]
    assert messages == [
        {"role": "tool", "tool_call_id": "a", "content": [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "tool", "tool_call_id": "b", "content": []},
        {"role": "tool", "tool_call_id": "c", "content": ""},
        {"role": "tool", "tool_call_id": "", "content": ""}]


def test_messages_without_block_content_pass_as_they_are() -> None:
    """No content: an assistant is dropped, others kept whole; string or non-list content
    is kept whole with its other keys; a block list giving nothing adds no message."""
    odd = [{"role": "assistant"}, {"role": "user", "name": "n"},
           {"role": "user", "content": "hi", "extra": 1}, {"role": "user", "content": 5},
           {"role": "user", "content": [{"type": "redacted_thinking", "data": "x"}]}, "junk"]
    assert to_chat_completions("anthropic", {"messages": odd})["messages"] == [
        {"role": "user", "name": "n"}, {"role": "user", "content": "hi", "extra": 1},
        {"role": "user", "content": 5}, "junk"]


def test_thinking_only_turn_has_empty_content_and_reasoning() -> None:
    """Thinking blocks join into reasoning_content; content is "" without text."""
    body = {"messages": [{"role": "assistant", "content": [
        {"type": "thinking", "thinking": "a"}, {"type": "thinking", "thinking": "b"}]}]}
    assert to_chat_completions("anthropic", body)["messages"] == [
        {"role": "assistant", "content": "", "reasoning_content": "ab"}]


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, "auto"), ({"type": "any"}, "required"),
    ({"type": "tool", "name": "f"}, "required"), ({"type": "none"}, None),
    ("auto", None), ({"name": "f"}, None)])
def test_tool_choice(choice: Any, expected: str | None) -> None:
    """auto -> "auto", any/tool -> "required"; anything else sets nothing."""
    chat = to_chat_completions("anthropic", {"messages": [], "tool_choice": choice})
    assert chat.get("tool_choice") == expected


def test_tools_keep_only_name_description_parameters() -> None:
    """Every element becomes a function; missing name/description are "", a missing
    input_schema {} (a null one stays null); a non-list tools is dropped."""
    tools = [{"name": "f", "input_schema": {"type": "object"}, "cache_control": {}},
             {"description": "d", "input_schema": None}, "junk"]
    chat = to_chat_completions("anthropic", {"messages": [], "tools": tools})
    assert chat["tools"] == [
        {"type": "function", "function": {"name": "f", "description": "",
                                          "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "", "description": "d", "parameters": None}},
        {"type": "function", "function": {"name": "", "description": "", "parameters": {}}}]
    assert "tools" not in to_chat_completions("anthropic", {"messages": [], "tools": {}})


def test_top_level_keys_in_the_server_order() -> None:
    """stop_sequences -> stop, max_tokens (4096 by default), pass-through keys, thinking
    budget, metadata user id; model and everything else dropped."""
    body = {"model": "m", "metadata": {"user_id": "u"}, "thinking": {"type": "enabled"},
            "chat_template_kwargs": {"enable_thinking": False}, "stream": True, "top_k": 5,
            "top_p": 0.9, "temperature": 0.5, "stop_sequences": ["X"], "messages": [],
            "service_tier": "auto"}
    chat = to_chat_completions("anthropic", body)
    assert chat == {"messages": [], "stop": ["X"], "max_tokens": 4096, "temperature": 0.5,
                    "top_p": 0.9, "top_k": 5, "stream": True,
                    "chat_template_kwargs": {"enable_thinking": False},
                    "thinking_budget_tokens": 10000, "__metadata_user_id": "u"}
    assert list(chat) == ["messages", "stop", "max_tokens", "temperature", "top_p", "top_k",
                          "stream", "chat_template_kwargs", "thinking_budget_tokens",
                          "__metadata_user_id"]


@pytest.mark.parametrize(("thinking", "expected"), [
    ({"type": "enabled", "budget_tokens": 2048}, 2048),
    ({"type": "enabled", "budget_tokens": 2048.9}, 2048),
    ({"type": "enabled", "budget_tokens": True}, 1),
    ({"type": "enabled", "budget_tokens": "lots"}, 10000),
    ({"type": "enabled", "budget_tokens": 2**32 + 5}, 5),
    ({"type": "disabled"}, None), ("enabled", None)])
def test_thinking_budget_follows_nlohmann_int_conversion(thinking: Any,
                                                         expected: int | None) -> None:
    """budget_tokens is read as a C++ int: numbers and booleans convert, text is the
    default 10000."""
    chat = to_chat_completions("anthropic", {"messages": [], "thinking": thinking})
    assert chat.get("thinking_budget_tokens") == expected


def test_metadata_without_user_id_and_null_max_tokens() -> None:
    """An empty user id adds nothing; an explicit null max_tokens stays null."""
    chat = to_chat_completions("anthropic", {"messages": [], "metadata": {"user_id": ""},
                                             "max_tokens": None})
    assert chat == {"messages": [], "max_tokens": None}


def test_anthropic_requires_messages_and_accepts_a_non_list() -> None:
    """No messages raises at /messages; a non-list messages converts to no messages."""
    with pytest.raises(EngineRequestError) as info:
        to_chat_completions("anthropic", {"system": "s"})
    assert (info.value.pointer, info.value.code) == ("/messages", "engine-field-missing")
    assert str(info.value.message) == "'messages' is required"
    assert to_chat_completions("anthropic", {"messages": "x"})["messages"] == []


def test_bad_tool_input_is_a_canonicalization_error_with_pointer() -> None:
    """A tool input with no JSON form names its place."""
    body = {"messages": [{"role": "assistant", "content": [
        {"type": "text", "text": "t"}, {"type": "tool_use", "input": {"a": {1, 2}}}]}]}
    with pytest.raises(CanonicalizationError) as info:
        to_chat_completions("anthropic", body)
    assert info.value.pointer == "/messages/0/content/1/input/a"


# --- Responses -----------------------------------------------------------------------------

def test_responses_session_merges_consecutive_assistant_items() -> None:
    """Reasoning, an output message and function calls in a row are one assistant message;
    outputs are tool messages; instructions the first system message; messages come last."""
    chat = to_chat_completions("openai-responses", responses_bodies()[8])
    assert list(chat) == ["model", "messages", "tools"]
    messages = chat["messages"]
    assert messages[0] == {"role": "system", "content": SYSTEM}
    assert messages[1] == {"role": "user", "content": [
        {"text": "What's the weather in Paris and in Rome today?", "type": "text"}]}
    assert messages[2] == {
        "role": "assistant", "content": [{"text": "Checking both cities.", "type": "text"}],
        "reasoning_content": "Two cities: two calls.",
        "tool_calls": [
            {"function": {"arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}",
                          "name": "get_weather"}, "id": "call_1", "type": "function"},
            {"function": {"arguments": "{\"city\":\"Rome\"}", "name": "get_weather"},
             "id": "call_2", "type": "function"}]}
    assert messages[3] == {"content": "18 degrees, sunny", "role": "tool",
                           "tool_call_id": "call_1"}
    assert messages[4] == {"content": [{"type": "text", "text": "24 degrees, clear"}],
                           "role": "tool", "tool_call_id": "call_2"}
    assert messages[5] == {"role": "assistant", "content": [
        {"text": "Paris 18°C sunny, Rome 24°C.", "type": "text"}]}
    assert messages[6]["role"] == "user" and "type" not in messages[6]
    assert messages[7] == {"role": "assistant", "tool_calls": [
        {"function": {"arguments": RESPONSES_INPUT[9]["arguments"], "name": "search_flights"},
         "id": "call_3", "type": "function"}]}
    assert messages[-1] == {"role": "developer", "content": [
        {"text": "Prices are in euros.", "type": "text"}]}
    assert chat["tools"][0] == {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": TOOLS[0]["input_schema"], "strict": True}}


def test_responses_top_level_renames_and_drops() -> None:
    """max_output_tokens -> max_tokens and reasoning.effort -> reasoning_effort at the end;
    non-function tools skipped; other keys kept in place."""
    chat = to_chat_completions("openai-responses", responses_bodies()[10])
    assert list(chat) == ["model", "tool_choice", "temperature", "messages", "tools",
                          "max_tokens", "reasoning_effort"]
    assert (chat["max_tokens"], chat["reasoning_effort"]) == (300, "low")
    assert [t["function"]["name"] for t in chat["tools"]] == [t["name"] for t in TOOLS]


def test_responses_only_unsupported_tools_and_null_instructions() -> None:
    """All tools skipped removes the key; a null instructions is an empty system message;
    a reasoning without effort is only removed."""
    chat = to_chat_completions("openai-responses", {**responses_bodies()[11],
                                                    "reasoning": {"summary": "auto"}})
    assert "tools" not in chat and "reasoning" not in chat
    assert chat["messages"][0] == {"role": "system", "content": ""}
    assert chat["parallel_tool_calls"] is False


def test_responses_string_input_and_existing_keys_keep_their_place() -> None:
    """A string input is one user message; a messages or max_tokens key already in the body
    is replaced where it stands; an explicit strict is kept."""
    chat = to_chat_completions("openai-responses", {
        "messages": "old", "input": "hi", "max_tokens": 1, "max_output_tokens": 9,
        "tools": [{"type": "function", "name": "f", "strict": False}]})
    assert chat == {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 9,
                    "tools": [{"type": "function", "function": {"name": "f",
                                                                "strict": False}}]}
    assert list(chat) == ["messages", "max_tokens", "tools"]


def test_responses_images_and_tool_output_images() -> None:
    """input_image becomes an image_url part; a tool output image gets the url wrapper."""
    chat = to_chat_completions("openai-responses", {"input": [
        {"role": "user", "content": [{"type": "input_image", "image_url": "data:x",
                                      "detail": "auto"}]},
        {"type": "function_call_output", "call_id": "c", "output": [
            {"type": "input_image", "image_url": "u"}, {"type": "input_text", "text": "t"}]}]})
    assert chat["messages"] == [
        {"role": "user", "content": [{"image_url": {"url": "data:x"}, "type": "image_url"}]},
        {"content": [{"type": "image_url", "image_url": {"url": "u"}},
                     {"type": "text", "text": "t"}], "role": "tool", "tool_call_id": "c"}]


def test_responses_refusal_and_reasoning_alone() -> None:
    """A refusal part is kept; a reasoning item after a user opens an assistant message."""
    chat = to_chat_completions("openai-responses", {"input": [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "summary": [], "content": [{"text": "r"}]},
        {"type": "message", "role": "assistant", "content": [
            {"type": "refusal", "refusal": "no"}]}]})
    assert chat["messages"][1] == {"role": "assistant", "content": [
        {"refusal": "no", "type": "refusal"}], "reasoning_content": "r"}


@pytest.mark.parametrize(("body", "message", "pointer", "code"), [
    ({}, "'input' is required", "/input", "engine-field-missing"),
    ({"input": "x", "previous_response_id": "resp_1"},
     "llama.cpp does not support 'previous_response_id'.", "/previous_response_id",
     "engine-unsupported"),
    ({"input": 3}, "'input' must be a string or array of objects", "/input",
     "engine-type-invalid"),
    ({"input": [{"role": "user", "content": [{"type": "input_text"}]}]},
     "'Input text' requires 'text'", "/input/0/content/0", "engine-field-missing"),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "a"},
                                             {"type": "input_audio"}]}]},
     "'type' must be one of 'input_text', 'input_image', or 'input_file'",
     "/input/0/content/1/type", "engine-type-invalid"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "'input_file' is not supported by llamacpp at this moment", "/input/0/content/0",
     "engine-unsupported"),
    ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
     "'image_url' is required", "/input/0/content/0", "engine-field-missing"),
    ({"input": [{"role": "assistant", "content": "hi"}]},
     "Cannot determine type of 'item'", "/input/0", "engine-type-invalid"),
    ({"input": ["text"]}, "Cannot determine type of 'item'", "/input/0", "engine-type-invalid"),
    ({"input": [{"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}]},
     "'Output text' requires 'text'", "/input/0/content/0", "engine-field-missing"),
    ({"input": [{"type": "message", "role": "assistant", "content": [{"type": "refusal"}]}]},
     "'Refusal' requires 'refusal'", "/input/0/content/0", "engine-field-missing"),
    ({"input": [{"type": "message", "role": "assistant", "content": [{"type": "image"}]}]},
     "'type' must be one of 'output_text' or 'refusal'", "/input/0/content/0/type",
     "engine-type-invalid"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": [{"text": "t"}]}]},
     "Output of tool call missing 'type' field", "/input/0/output/0", "engine-field-missing"),
    ({"input": [{"type": "function_call_output", "call_id": "c",
                 "output": [{"type": "output_text"}]}]},
     "Output of tool call should be 'Input text' or 'Input image'", "/input/0/output/0/type",
     "engine-type-invalid"),
    ({"input": [{"type": "function_call_output", "call_id": "c",
                 "output": [{"type": "input_image"}]}]},
     "'image_url' is required", "/input/0/output/0", "engine-field-missing"),
    ({"input": [{"type": "reasoning", "summary": []}]},
     "item['content'] is not an array", "/input/0/content", "engine-type-invalid"),
    ({"input": [{"type": "reasoning", "summary": [], "content": []}]},
     "item['content'] is empty", "/input/0/content", "engine-field-missing"),
    ({"input": [{"type": "reasoning", "summary": [], "content": [{"text": 1}]}]},
     "item['content']['text'] is not a string", "/input/0/content/0/text",
     "engine-type-invalid"),
    ({"input": "x", "tools": {"type": "function"}}, "'tools' must be an array of objects",
     "/tools", "engine-type-invalid"),
])
def test_responses_errors_name_the_server_message_and_pointer(
        body: dict[str, Any], message: str, pointer: str, code: str) -> None:
    """Each throw of the C++ is an EngineRequestError with its message, at its value."""
    with pytest.raises(EngineRequestError) as info:
        to_chat_completions("openai-responses", body)
    assert (info.value.message, info.value.pointer, info.value.code) == (message, pointer, code)
    assert isinstance(info.value, ValueError)


# --- chat and the dispatch ------------------------------------------------------------------

def test_chat_is_a_deep_copy_and_inputs_are_never_modified() -> None:
    """The chat body comes back equal but unshared; conversions leave their input alone."""
    body: dict[str, Any] = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "x"}]}]}
    chat = to_chat_completions("openai-chat", body)
    assert chat == body
    chat["messages"][0]["content"][0]["text"] = "changed"
    assert body["messages"][0]["content"][0]["text"] == "x"
    for fmt, source in [("anthropic", anthropic_bodies()[7]),
                        ("openai-responses", responses_bodies()[8])]:
        before = copy.deepcopy(source)
        to_chat_completions(fmt, source)
        assert source == before


def test_unknown_wire_format_names_the_known_ones() -> None:
    """Only the three request formats convert."""
    with pytest.raises(EngineRequestError, match="anthropic, openai-responses, openai-chat"):
        to_chat_completions("gemini", {})


# --- against a real llama-server -----------------------------------------------------------

@pytest.fixture
def engine(llama_url: str) -> Iterator[httpx.Client]:
    """A client for the real llama-server (``llama_url`` in conftest)."""
    with httpx.Client(base_url=llama_url, timeout=30.0) as client:
        yield client


def _outcome(answer: httpx.Response, key: str) -> tuple[str, Any]:
    """``("tokens", n)`` for a 2xx answer, else ``("error", the server's message)``."""
    if answer.is_success:
        return "tokens", answer.json()[key]
    return "error", answer.json()["error"]["message"]


def _port_outcome(engine: httpx.Client, fmt: str, body: dict[str, Any]) -> tuple[str, Any]:
    """What /tokenize(/apply-template(port(body))) gives: a token count or the error."""
    rendered = engine.post("/apply-template", json=to_chat_completions(fmt, body))
    if not rendered.is_success:
        return _outcome(rendered, "prompt")
    answer = engine.post("/tokenize", json={"content": rendered.json()["prompt"],
                                            "add_special": True, "parse_special": True})
    return "tokens", len(answer.raise_for_status().json()["tokens"])


@pytest.mark.real_engine
@pytest.mark.parametrize("index", range(len(anthropic_bodies())))
def test_port_counts_equal_messages_count_tokens(engine: httpx.Client, index: int) -> None:
    """/tokenize(/apply-template(port(body))) has as many tokens as the engine's own
    /v1/messages/count_tokens of the body (or fails with the same message, when the chat
    template rejects the conversation)."""
    body = anthropic_bodies()[index]
    expected = _outcome(engine.post("/v1/messages/count_tokens", json=body), "input_tokens")
    assert _port_outcome(engine, "anthropic", body) == expected


@pytest.mark.real_engine
@pytest.mark.parametrize("index", range(len(responses_bodies())))
def test_port_counts_equal_responses_input_tokens(engine: httpx.Client, index: int) -> None:
    """The same against /v1/responses/input_tokens."""
    body = responses_bodies()[index]
    expected = _outcome(engine.post("/v1/responses/input_tokens", json=body), "input_tokens")
    assert _port_outcome(engine, "openai-responses", body) == expected


@pytest.mark.real_engine
@pytest.mark.parametrize(("fmt", "body"), [
    ("anthropic", {"system": "s"}),
    ("openai-responses", {"model": "m"}),
    ("openai-responses", {"input": "x", "previous_response_id": "r"}),
    ("openai-responses", {"input": [{"role": "user", "content": [{"type": "input_file"}]}]}),
    ("openai-responses", {"input": [{"role": "assistant", "content": "x"}]}),
    ("openai-responses", {"input": [{"type": "reasoning", "summary": [], "content": []}]}),
    ("openai-responses", {"input": "x", "tools": {}}),
])
def test_engine_rejects_what_the_port_rejects_with_the_same_message(
        engine: httpx.Client, fmt: str, body: dict[str, Any]) -> None:
    """The engine's error answer carries the port's message."""
    with pytest.raises(EngineRequestError) as info:
        to_chat_completions(fmt, body)
    path = "/v1/messages/count_tokens" if fmt == "anthropic" else "/v1/responses/input_tokens"
    answer = engine.post(path, json=body)
    assert answer.status_code >= 400
    assert info.value.message in answer.json()["error"]["message"]
