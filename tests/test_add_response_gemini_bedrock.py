"""``Conversation.add_response`` for Gemini ``generateContent`` and Bedrock Converse answers
(dicts, google-genai SDK objects, boto3's dicts from the official clients through the
emulator): the next render extends the previous one exactly, Gemini thought signatures go
back on their parts unchanged, Converse reasoning blocks are kept as received."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from stableprompt import HistoryError, PromptBuilder, ToolCall
from stableprompt._canonical import loads
from stableprompt._wire._formats import segment_request
from stableprompt.emulator import AssistantTurn, Emulator, FakeClock, ScriptedResponder
from stableprompt.emulator import ToolCall as ScriptedCall

genai = pytest.importorskip("google.genai")
types = pytest.importorskip("google.genai.types")
boto3 = pytest.importorskip("boto3")

SYSTEM = "You are a careful weather assistant. " * 900  # above every minimum
TOOL = {"name": "get_weather", "description": "Weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}
MODEL_G = "gemini-2.5-pro"
MODEL_B = "anthropic.claude-sonnet-4-5-20250929-v1:0"
SIG_CALL = "Q0FMTCtTSUc/"  # standard base64 with '+' and '/': kept as received
GEMINI: dict[str, Any] = {
    "candidates": [{"content": {"role": "model", "parts": [
        {"text": "Paris first.", "thought": True, "thoughtSignature": "VEhPVUdIVA=="},
        {"functionCall": {"id": "fc_1", "name": "get_weather", "args": {"city": "Paris"}},
         "thoughtSignature": SIG_CALL},
        {"functionCall": {"id": "fc_2", "name": "get_weather", "args": {"city": "Oslo"}}}]},
        "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
    "modelVersion": MODEL_G, "responseId": "r1"}
CONVERSE: dict[str, Any] = {
    "output": {"message": {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "Paris.", "signature": "c2ln"}}},
        {"text": "Checking."},
        {"toolUse": {"toolUseId": "tu_1", "name": "get_weather", "input": {"city": "Paris"}}}]}},
    "stopReason": "tool_use", "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
    "metrics": {"latencyMs": 1}}


def conversation() -> Any:
    conv = PromptBuilder(system=SYSTEM, tools=[TOOL], tokenizer=None).freeze().conversation()
    conv.user("Weather in Paris and Oslo?")
    return conv


def _extends(before: Any, after: Any) -> bool:
    """The earlier request's segments (its tail aside) are a prefix of the next one's."""
    return bool(after.segments[: len(before.segments) - 1] == before.segments[:-1])


def _parts(request: Any) -> list[dict[str, Any]]:
    body = loads(request.content)
    return [p for c in body["contents"] for p in c["parts"]]


@pytest.mark.parametrize("sdk", [False, True], ids=["dict", "sdk"])
def test_gemini_response_with_thought_signatures(sdk: bool) -> None:
    """A Gemini answer (JSON or a google-genai GenerateContentResponse) becomes the assistant
    turn: both calls in order, the first call's thoughtSignature back on its functionCall
    part with the same bytes (the SDK's dump is URL-safe base64 of the same signature), the
    thought part kept as received, and the next render extends the previous one exactly."""
    conv = conversation()
    before = conv.render().to_gemini(model=MODEL_G)
    response = types.GenerateContentResponse.model_validate(GEMINI) if sdk else GEMINI
    message = conv.add_response(response)
    assert message.tool_calls == (ToolCall("fc_1", "get_weather", {"city": "Paris"}),
                                  ToolCall("fc_2", "get_weather", {"city": "Oslo"}))
    conv.tool_result("fc_1", "sunny")
    conv.tool_result("fc_2", "rain")
    after = conv.render().to_gemini(model=MODEL_G)
    assert _extends(before, after)
    calls = [p for p in _parts(after) if "functionCall" in p]
    sent = calls[0]["thoughtSignature"]
    expected = base64.urlsafe_b64encode(base64.b64decode(SIG_CALL)).decode() if sdk else SIG_CALL
    assert sent == expected and base64.urlsafe_b64decode(sent) == base64.b64decode(SIG_CALL)
    assert "thoughtSignature" not in calls[1]  # parallel calls: only the first is signed
    thought = next(p for p in _parts(after) if p.get("thought"))
    assert thought["text"] == "Paris first." and "thoughtSignature" in thought
    # The signature is part of the prefix: another signature diverges at that part.
    changed = conversation()
    changed.add_response({**GEMINI, "candidates": [{**GEMINI["candidates"][0], "content": {
        "role": "model", "parts": [{**p, "thoughtSignature": "T1RIRVI="} if "functionCall" in p
                                   and "thoughtSignature" in p else p
                                   for p in GEMINI["candidates"][0]["content"]["parts"]]}}]})
    changed.tool_result("fc_1", "sunny")
    changed.tool_result("fc_2", "rain")
    other = changed.render().to_gemini(model=MODEL_G)
    first = next(i for i, (a, b) in enumerate(zip(after.segments, other.segments, strict=False))
                 if a != b)
    assert after.segments[first].kind == "message" and first >= len(before.segments) - 1


def test_gemini_signature_on_the_text_and_other_formats() -> None:
    """A signature on the answer's text goes back on the text part; renders to formats that
    have no place for it leave it out; two signed text parts are a typed error."""
    conv = conversation()
    signed_text = {**GEMINI, "candidates": [{"content": {"role": "model", "parts": [
        {"text": "Sunny."}, {"text": " Mild.", "thoughtSignature": "VEVYVA=="}]},
        "finishReason": "STOP"}]}
    conv.add_response(signed_text)
    conv.user("Thanks.")
    texts = [p for p in _parts(conv.render().to_gemini(model=MODEL_G)) if "thoughtSignature" in p]
    assert texts == [{"text": "Sunny. Mild.", "thoughtSignature": "VEVYVA=="}]
    assert "VEVYVA" not in conv.render().to_anthropic(model="m", max_tokens=8).content.decode()
    assert "VEVYVA" not in str(conv.render().to_bedrock_converse(model_id=MODEL_B).body)
    twice = {**GEMINI, "candidates": [{"content": {"role": "model", "parts": [
        {"text": "a", "thoughtSignature": "QQ=="}, {"text": "b", "thoughtSignature": "Qg=="}]},
        "finishReason": "STOP"}]}
    with pytest.raises(HistoryError) as info:
        conversation().add_response(twice)
    assert (info.value.code, info.value.pointer) == ("history-response",
                                                     "/candidates/0/content/parts/1")


def test_converse_response_keeps_reasoning_and_extends_the_prefix() -> None:
    """A Converse answer becomes the assistant turn with its reasoningContent block kept as
    received (dropping it on a tool-calling turn is refused, as on Anthropic), and the next
    render extends the previous one exactly."""
    conv = conversation()
    before = conv.render().to_bedrock_converse(model_id=MODEL_B)
    message = conv.add_response(CONVERSE)
    assert message.tool_calls == (ToolCall("tu_1", "get_weather", {"city": "Paris"}),)
    conv.tool_result("tu_1", "sunny")
    after = conv.render().to_bedrock_converse(model_id=MODEL_B)
    assert _extends(before, after)
    assistant = next(m for m in after.body["messages"] if m["role"] == "assistant")
    assert assistant["content"][0] == CONVERSE["output"]["message"]["content"][0]
    with pytest.raises(HistoryError) as info:
        conversation().add_response(CONVERSE, reasoning="drop")
    assert (info.value.code, info.value.pointer) == ("history-reasoning-required",
                                                     "/output/message/content/0")
    with pytest.raises(HistoryError) as info:
        conversation().add_response(
            {**CONVERSE, "output": {"message": {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "tu_1", "name": "nope", "input": {}}}]}}})
    assert (info.value.code, info.value.pointer) == ("history-unknown-tool",
                                                     "/output/message/content/0/toolUse/name")


@pytest.fixture
def emu() -> Iterator[Emulator]:
    script = ScriptedResponder([AssistantTurn(tool_calls=(
        ScriptedCall("get_weather", {"city": "Paris"}),))], cycle=True)
    with Emulator(clock=FakeClock(), responder=script) as emulator:
        yield emulator


def test_official_google_genai_answer_extends_the_render(emu: Emulator) -> None:
    """google-genai's GenerateContentResponse for our rendered request, added as is: the next
    rendered request extends it exactly, is accepted, and reads the first request's blocks
    (sent as rendered too: the SDK serializes the request its own way)."""
    conv = conversation()
    first = conv.render().to_gemini(model=MODEL_G)
    headers = {"content-type": "application/json", "x-goog-api-key": "k"}
    with httpx.Client(base_url=emu.base_url) as http:
        assert http.post(first.path, content=first.content, headers=headers).status_code == 200
    client = genai.Client(api_key="g-key", http_options=types.HttpOptions(base_url=emu.base_url))
    body = segment_request("gemini", loads(first.content)).body
    config = types.GenerateContentConfig(
        system_instruction=body["systemInstruction"]["parts"][0]["text"],
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration.model_validate(
            body["tools"][0]["functionDeclarations"][0])])])
    response = client.models.generate_content(model=MODEL_G, contents=body["contents"],
                                              config=config)
    message = conv.add_response(response)
    (call,) = message.tool_calls
    assert call.name == "get_weather" and call.arguments == {"city": "Paris"}
    conv.tool_result(call.id, "sunny")
    second = conv.render().to_gemini(model=MODEL_G)
    assert _extends(first, second)
    with httpx.Client(base_url=emu.base_url) as http:
        answer = http.post(second.path, content=second.content, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["usageMetadata"]["cachedContentTokenCount"] > 2048


def test_official_boto3_converse_answer_extends_the_render(emu: Emulator) -> None:
    """boto3's converse() answer for our rendered body, added as is: the next rendered body
    extends it exactly and boto3 sends it (it reads the cache point the first one wrote)."""
    conv = conversation()
    first = conv.render().to_bedrock_converse(model_id=MODEL_B)
    client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=emu.base_url,
                          aws_access_key_id="AKIDTEST", aws_secret_access_key="secret")
    response = client.converse(modelId=MODEL_B, **first.body)
    message = conv.add_response(response)
    (call,) = message.tool_calls
    assert call.name == "get_weather"
    conv.tool_result(call.id, "sunny")
    second = conv.render().to_bedrock_converse(model_id=MODEL_B)
    assert _extends(first, second)
    usage = client.converse(modelId=MODEL_B, **second.body)["usage"]
    assert usage["cacheReadInputTokens"] > 0


def _gemini_with(parts: list[dict[str, Any]], role: str = "model") -> dict[str, Any]:
    return {"candidates": [{"content": {"role": role, "parts": parts}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 10}}


def _converse_with(content: list[Any], role: str = "assistant") -> dict[str, Any]:
    return {"output": {"message": {"role": role, "content": content}}, "stopReason": "end_turn",
            "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}}


@pytest.mark.parametrize(("response", "pointer"), [
    (_gemini_with([{"text": "Here."}, {"inlineData": {"mimeType": "image/png", "data": "AA=="}}]),
     "/candidates/0/content/parts/1"),
    (_gemini_with([{"executableCode": {"language": "PYTHON", "code": "1"}}, {"text": "1"}]),
     "/candidates/0/content/parts/0"),
    (_gemini_with([{"text": "a"}, {"fileData": {"fileUri": "gs://b/c", "mimeType": "a/b"}}]),
     "/candidates/0/content/parts/1"),
    (_gemini_with([{}]), "/candidates/0/content/parts/0"),
    (_gemini_with([{"functionCall": "get_weather"}]), "/candidates/0/content/parts/0/functionCall"),
    (_gemini_with([{"text": "a"}], role="user"), "/candidates/0/content/role"),
    (_converse_with([{"text": "x"}, {"image": {"format": "png", "source": {"bytes": "AA=="}}}]),
     "/output/message/content/1"),
    (_converse_with([{"citationsContent": {"content": [{"text": "c"}], "citations": []}}]),
     "/output/message/content/0"),
    (_converse_with([{"toolUse": "get_weather"}]), "/output/message/content/0/toolUse"),
    (_converse_with([{"text": "x"}], role="user"), "/output/message/role"),
])
def test_parts_add_response_cannot_keep_are_errors_not_dropped(response: dict[str, Any],
                                                                pointer: str) -> None:
    """An answer part add_response has no place for (an image, code execution, a file, a
    citation, an empty part) or a turn of the wrong role is a typed error at its pointer:
    dropping it would send the model a history it never produced."""
    with pytest.raises(HistoryError) as caught:
        conversation().add_response(response)
    assert caught.value.code == "history-response" and caught.value.pointer == pointer


def test_converse_answer_without_stop_reason_is_read_as_converse() -> None:
    """A Converse answer is told apart by its ``output`` object (a Responses ``output`` is a
    list), not by ``stopReason``, which a trimmed answer may lack."""
    answer = _converse_with([{"text": "Sunny."}])
    del answer["stopReason"]
    conv = conversation()
    assert conv.add_response(answer).role == "assistant"
    assert "Sunny." in conv.render().to_bedrock_converse(model_id=MODEL_B).content.decode()


def test_gemini_answer_with_several_candidates_needs_a_choice() -> None:
    """candidateCount > 1: add_response asks which candidate continues the conversation
    (before, every candidate but the first was dropped in silence); ``choice`` picks one and
    its errors point into it."""
    answer = _gemini_with([{"text": "first"}])
    answer["candidates"].append({"content": {"role": "model", "parts": [
        {"text": "second"}, {"inlineData": {"mimeType": "image/png", "data": "AA=="}}]}})
    with pytest.raises(HistoryError) as caught:
        conversation().add_response(answer)
    assert (caught.value.code, caught.value.pointer) == ("history-choices", "/candidates")
    conv = conversation()
    assert conv.add_response(answer, choice=0).text == "first"
    with pytest.raises(HistoryError) as caught:
        conversation().add_response(answer, choice=1)
    assert caught.value.pointer == "/candidates/1/content/parts/1"
    with pytest.raises(HistoryError) as caught:
        conversation().add_response(answer, choice=2)
    assert caught.value.pointer == "/candidates/2"


def test_boto3_redacted_reasoning_bytes_are_named_where_they_are() -> None:
    """boto3 gives ``redactedContent`` as bytes: the error points at it in the answer (it
    pointed into the stored message, ``/content/0/item/...``), and says why."""
    answer = _converse_with([{"reasoningContent": {"redactedContent": b"\x00\x01"}},
                             {"text": "Done."}])
    with pytest.raises(HistoryError) as caught:
        conversation().add_response(answer)
    assert caught.value.code == "history-response"
    assert caught.value.pointer == "/output/message/content/0/reasoningContent/redactedContent"


def test_gemini_calls_without_ids_get_new_ids_on_every_turn() -> None:
    """Gemini 2.x sends function calls without ids; an answer without ``responseId`` made
    the same ``gemini-0`` on every turn, so the second such turn was refused as a duplicate
    call. The made-up ids stay deterministic and new in the conversation; an id the provider
    sent twice is still refused."""
    answer = _gemini_with([{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                           {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}])
    conv = conversation()
    seen = []
    for _ in range(3):
        message = conv.add_response(answer)
        seen.append([call.id for call in message.tool_calls])
        for call in message.tool_calls:
            conv.tool_result(call.id, "sunny")
    assert seen == [["gemini-0", "gemini-1"], ["gemini-0.1", "gemini-1.1"],
                    ["gemini-0.2", "gemini-1.2"]]
    ids = [part["functionCall"]["id"] for content in
           conv.render().to_gemini(model=MODEL_G).body["contents"]
           for part in content["parts"] if "functionCall" in part]
    assert ids == [i for turn in seen for i in turn]
    sent = _gemini_with([{"functionCall": {"id": "fc_1", "name": "get_weather",
                                           "args": {"city": "Paris"}}}])
    conv.add_response(sent)
    conv.tool_result("fc_1", "sunny")
    with pytest.raises(HistoryError) as caught:
        conv.add_response(sent)
    assert caught.value.code == "history-duplicate-call"
