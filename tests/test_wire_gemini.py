"""Gemini requests: body assembly from the builder, golden bytes checked against the official
SDK's types, segmenting, endpoint and format detection."""

from __future__ import annotations

from typing import Any

import pytest

from stableprompt import Conversation, PromptBuilder, Tool
from stableprompt._canonical import loads
from stableprompt._exceptions import HistoryError, InputError
from stableprompt._wire import gemini
from stableprompt._wire._formats import (
    assistant_turn,
    detect,
    endpoint,
    response_format,
    segment_request,
    with_path_model,
)

TOOLS = [Tool("get_weather", "Weather for a city.",
              {"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]})]

GOLDEN = (
    b'{"contents":[{"parts":[{"text":"Weather in Paris?"}],"role":"user"},'
    b'{"parts":[{"text":"Checking."},{"functionCall":{"args":{"city":"Paris"},"id":"t1",'
    b'"name":"get_weather"}}],"role":"model"},{"parts":[{"functionResponse":{"id":"t1",'
    b'"name":"get_weather","response":{"output":"{\\"celsius\\":18}"}}},'
    b'{"text":"<now>\\n12:00\\n</now>"}],"role":"user"}],'
    b'"generationConfig":{"maxOutputTokens":64},'
    b'"systemInstruction":{"parts":[{"text":"Be brief."},{"text":"Use metric units."}]},'
    b'"tools":[{"functionDeclarations":[{"description":"Weather for a city.",'
    b'"name":"get_weather","parametersJsonSchema":{"properties":{"city":{"type":"string"}},'
    b'"required":["city"],"type":"object"}}]}]}'
)


def _conversation() -> Conversation:
    head = (PromptBuilder(tokenizer=None).system("Be brief.").system("Use metric units.")
            .tools(TOOLS).tail_slot("now").freeze())
    conv = head.conversation()
    conv.user("Weather in Paris?")
    conv.assistant("Checking.", tool_calls=[{"id": "t1", "name": "get_weather",
                                             "arguments": {"city": "Paris"}}])
    conv.tool_result("t1", {"celsius": 18})
    return conv


def test_golden_body_and_path() -> None:
    """to_gemini renders systemInstruction, tools.functionDeclarations and contents (tail
    last, function responses named), the model in the URL path only."""
    request = _conversation().render(tail={"now": "12:00"}).to_gemini(
        model="gemini-2.5-pro", generationConfig={"maxOutputTokens": 64})
    assert request.content == GOLDEN
    assert request.path == "/v1beta/models/gemini-2.5-pro:generateContent"
    assert "model" not in request.body
    streamed = _conversation().render(tail={"now": "12:00"}).to_gemini(
        model="models/gemini-2.5-pro", stream=True)
    assert streamed.path == "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


def test_golden_body_is_what_the_official_sdk_types_accept() -> None:
    """The body validates against google-genai's Content / Tool / GenerateContentConfig types
    (camelCase aliases, as on the wire) with nothing left over."""
    types = pytest.importorskip("google.genai.types")
    body = loads(GOLDEN)
    for content in body["contents"]:
        parsed = types.Content.model_validate(content)
        dumped = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
        assert dumped == content
    tool = types.Tool.model_validate(body["tools"][0])
    assert tool.function_declarations is not None
    assert tool.function_declarations[0].parameters_json_schema == TOOLS[0].input_schema
    system = types.Content.model_validate(body["systemInstruction"])
    assert [p.text for p in system.parts or ()] == ["Be brief.", "Use metric units."]


def test_segments_are_model_scoped_and_per_part() -> None:
    """The segmenter reads the model from the path: params, each declaration, each system
    part, then one segment per content part; the tail is the last segment."""
    request = _conversation().render(tail={"now": "12:00"}).to_gemini(model="gemini-2.5-pro")
    names = [s.name for s in request.segments]
    assert names == ["param:model", "tools[0].functionDeclarations[0]",
                     "systemInstruction.parts[0]", "systemInstruction.parts[1]",
                     "contents[0].parts[0]", "contents[1].parts[0]", "contents[1].parts[1]",
                     "contents[2].parts[0]", "contents[2].parts[1]"]
    assert [s.name for s in request.tail_segments] == ["contents[2].parts[1]"]
    other = _conversation().render(tail={"now": "12:00"}).to_gemini(model="gemini-2.5-flash")
    assert other.head_fingerprint != request.head_fingerprint
    data = request.data
    for s in request.segments:
        assert data[s.start:s.end]


def test_append_only_turns_share_the_prefix() -> None:
    """Two consecutive turns: every segment of the first but its tail starts the second."""
    conv = _conversation()
    first = conv.render(tail={"now": "12:00"}).to_gemini(model="gemini-2.5-pro")
    conv.assistant("18C in Paris.")
    conv.user("Thanks")
    second = conv.render(tail={"now": "12:01"}).to_gemini(model="gemini-2.5-pro")
    kept = [s.digest for s in first.segments if s not in first.tail_segments]
    assert [s.digest for s in second.segments[:len(kept) - 1]] == kept[:-1]


def test_detect_endpoint_and_response_format() -> None:
    """Paths with ':generateContent' and bodies with 'contents' are Gemini; a response with
    'candidates' too; the model is taken from the path for segmenting."""
    assert endpoint("/v1beta/models/gemini-2.5-pro:generateContent") == "gemini"
    assert endpoint("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse") == "gemini"
    assert detect({"contents": []}) == "gemini"
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}
    view = with_path_model("gemini", body, "/v1beta/models/gemini-2.5-pro:generateContent")
    assert next(iter(view)) == "model" and view["model"] == "gemini-2.5-pro"
    assert segment_request("gemini", view).model == "gemini-2.5-pro"
    response = {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "Hi"}, {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}]},
        "finishReason": "STOP"}], "responseId": "r1",
        "usageMetadata": {"promptTokenCount": 10}}
    assert response_format(response) == "gemini"
    turn = assistant_turn("gemini", response)
    assert turn.text == "Hi"
    assert turn.tool_calls == ({"id": "r1-1", "name": "get_weather",
                                "arguments": {"city": "Rome"}},)


def test_cached_content_request_leaves_out_the_head() -> None:
    """A body that references a cache has no systemInstruction / tools / toolConfig and only
    the history the cache does not hold."""
    conv = _conversation()
    body = gemini.render(conv.render(tail={"now": "x"}), params={},
                         cached_content="cachedContents/abc", cached_messages=2)
    decoded = loads(body)
    assert set(decoded) == {"cachedContent", "contents"}
    assert decoded["contents"][0]["parts"][0]["functionResponse"]["name"] == "get_weather"
    with pytest.raises(InputError):
        gemini.render(conv.render(tail={"now": "x"}), params={"toolConfig": {}},
                      cached_content="cachedContents/abc")


def test_tool_result_without_its_call_is_refused() -> None:
    """A functionResponse needs the function's name: a result for an unknown call raises."""
    with pytest.raises(HistoryError) as info:
        gemini.part({"type": "tool_result", "tool_call_id": "x", "content": "c"}, {})
    assert info.value.code == "history-tool-result"


def test_only_generate_methods_are_prompt_requests() -> None:
    """``models/{model}:countTokens`` / ``:embedContent`` are not generateContent calls: not
    recorded as Gemini prompts (the proxy forwards them unanalysed)."""
    from stableprompt._wire._formats import endpoint
    from stableprompt._wire.gemini import model_from_path

    assert model_from_path("/v1beta/models/gemini-2.5-flash:generateContent") == \
        "gemini-2.5-flash"
    assert endpoint("/v1beta/models/g:streamGenerateContent?alt=sse") == "gemini"
    for method in ("countTokens", "embedContent", "batchGenerateContent"):
        assert model_from_path(f"/v1beta/models/gemini-2.5-flash:{method}") is None
        assert endpoint(f"/v1beta/models/gemini-2.5-flash:{method}") is None
