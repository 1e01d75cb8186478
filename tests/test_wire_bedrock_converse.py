"""Bedrock Converse requests: body assembly with cachePoint blocks, golden bytes checked
against botocore's service model, segmenting (cachePoint as a breakpoint) and detection."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from stableprompt import Conversation, PromptBuilder, Tool
from stableprompt._canonical import loads
from stableprompt._exceptions import BreakpointError
from stableprompt._wire._formats import assistant_turn as turn_of
from stableprompt._wire._formats import detect, endpoint, response_format, segment_request

TOOLS = [Tool("get_weather", "Weather for a city.",
              {"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]})]
MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"

GOLDEN = (
    b'{"inferenceConfig":{"maxTokens":64},"messages":[{"content":[{"text":"Weather in '
    b'Paris?"}],"role":"user"},{"content":[{"text":"Checking."},{"toolUse":{"input":'
    b'{"city":"Paris"},"name":"get_weather","toolUseId":"t1"}}],"role":"assistant"},'
    b'{"content":[{"toolResult":{"content":[{"text":"{\\"celsius\\":18}"}],"toolUseId":"t1"}},'
    b'{"cachePoint":{"type":"default"}},{"text":"<now>\\n12:00\\n</now>"}],"role":"user"}],'
    b'"system":[{"text":"Be brief."},{"text":"Use metric units."},'
    b'{"cachePoint":{"type":"default"}}],"toolConfig":{"tools":[{"toolSpec":{"description":'
    b'"Weather for a city.","inputSchema":{"json":{"properties":{"city":{"type":"string"}},'
    b'"required":["city"],"type":"object"}},"name":"get_weather"}}]}}'
)


def _conversation(head_ttl: str = "5m") -> Conversation:
    head = (PromptBuilder(tokenizer=None).system("Be brief.").system("Use metric units.")
            .tools(TOOLS).tail_slot("now").freeze(head_ttl=head_ttl))
    conv = head.conversation()
    conv.user("Weather in Paris?")
    conv.assistant("Checking.", tool_calls=[{"id": "t1", "name": "get_weather",
                                             "arguments": {"city": "Paris"}}])
    conv.tool_result("t1", {"celsius": 18})
    return conv


def test_golden_body_and_path() -> None:
    """to_bedrock_converse renders toolConfig, system and messages with a cachePoint at the
    end of the head and of the stable history (before the tail); the model id is in the
    percent-encoded path only."""
    request = _conversation().render(tail={"now": "12:00"}).to_bedrock_converse(
        model_id=MODEL, inferenceConfig={"maxTokens": 64})
    assert request.content == GOLDEN
    assert request.path == "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    stream = _conversation().render(tail={"now": "x"}).to_bedrock_converse(
        model_id=MODEL, stream=True)
    assert stream.path.endswith("/converse-stream")


def test_golden_body_validates_against_botocore() -> None:
    """botocore's own parameter validator accepts the body as a ConverseRequest."""
    botocore_session = pytest.importorskip("botocore.session")
    from botocore.validate import ParamValidator  # type: ignore[import-untyped]

    model = botocore_session.get_session().get_service_model("bedrock-runtime")
    shape = model.operation_model("Converse").input_shape
    report = ParamValidator().validate({"modelId": MODEL, **loads(GOLDEN)}, shape)
    assert not report.has_errors(), report.generate_report()


def test_cache_points_are_breakpoints_in_segments() -> None:
    """A cachePoint block is no segment: it marks the segment before it."""
    request = _conversation().render(tail={"now": "12:00"}).to_bedrock_converse(model_id=MODEL)
    marked = [(s.name, s.breakpoint) for s in request.segments if s.breakpoint]
    assert marked == [("system[1]", "5m"), ("messages[2].content[0]", "5m")]
    assert request.segments[0].name == "param:model"
    assert [s.name for s in request.tail_segments] == ["messages[2].content[2]"]


def test_one_hour_ttl_only_where_the_model_offers_it() -> None:
    """history_ttl='1h' renders a ttl on models with 1h (Sonnet 4.5) and raises on a model
    the policy gives 5m only (Sonnet 4.6)."""
    rendered = _conversation("1h").render(tail={"now": "x"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        body = rendered.to_bedrock_converse(model_id=MODEL, history_ttl="1h").body
    last = body["messages"][-1]["content"]
    assert {"cachePoint": {"type": "default", "ttl": "1h"}} in last
    assert body["system"][-1] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    with pytest.raises(BreakpointError) as info:
        rendered.to_bedrock_converse(model_id="anthropic.claude-sonnet-4-6", history_ttl="1h")
    assert info.value.code == "breakpoint-ttl"


def test_detection_never_takes_converse_for_anthropic() -> None:
    """B21: a Converse body (system blocks without type, cachePoint blocks) is detected as
    bedrock-converse, by path and by body; a Converse response too."""
    body: dict[str, Any] = loads(GOLDEN)
    assert detect(body) == "bedrock-converse"
    assert detect({"messages": [{"role": "user", "content": [{"text": "hi"}]}],
                   "system": [{"text": "s"}]}) == "bedrock-converse"
    assert detect({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
                   "system": "s"}) == "anthropic"
    assert endpoint("/model/anthropic.claude-x%3A0/converse") == "bedrock-converse"
    assert endpoint("/model/m/converse-stream") == "bedrock-converse"
    segmented = segment_request("bedrock-converse", body)
    assert len(segmented.breakpoints) == 2
    response = {"output": {"message": {"role": "assistant", "content": [
        {"text": "ok"}, {"toolUse": {"toolUseId": "u1", "name": "get_weather",
                                     "input": {"city": "Rome"}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 3, "outputTokens": 1,
                                            "totalTokens": 4}, "metrics": {"latencyMs": 1}}
    assert response_format(response) == "bedrock-converse"
    turn = turn_of("bedrock-converse", response)
    assert turn.text == "ok"
    assert turn.tool_calls == ({"id": "u1", "name": "get_weather",
                                "arguments": {"city": "Rome"}},)
