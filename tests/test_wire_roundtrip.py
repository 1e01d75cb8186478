"""Round trip per request format: segmenting what ``to_<format>()`` produced gives back the
rendered prompt's segments, in the same order and with the wire shapes the format renders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stableprompt import (
    Conversation,
    PromptBuilder,
    ProviderRequest,
    Recorder,
    RenderedPrompt,
    Tool,
)
from stableprompt._canonical import canonical_json, loads
from stableprompt._lint._capture import CaptureProblem, Skipped, iter_capture
from stableprompt._wire import anthropic, openai_chat, openai_responses
from stableprompt._wire._formats import detect, endpoint, segment_request

TOOLS = [
    Tool("search", "Search the web.", {"type": "object", "properties": {"q": {"type": "string"}},
                                       "required": ["q"]}),
    Tool("get_weather", "Weather for a city.",
         {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
]


def _conversation() -> Conversation:
    head = (PromptBuilder(tokenizer=None).system("Be brief.").system("Use metric units.")
            .tools(TOOLS).tail_slot("now").freeze())
    conv = head.conversation()
    conv.user("Weather in Paris?")
    conv.assistant("Checking.", tool_calls=[{"id": "t1", "name": "get_weather",
                                             "arguments": {"city": "Paris"}}])
    conv.tool_result("t1", {"celsius": 18})
    conv.assistant("It is 18C.")
    conv.user(["And Rome?", "Briefly."])
    return conv


RENDER: dict[str, Callable[[RenderedPrompt], ProviderRequest]] = {
    "anthropic": lambda r: r.to_anthropic(model="claude-sonnet-5", max_tokens=64),
    "openai-chat": lambda r: r.to_openai_chat(model="gpt-5.6", prompt_cache_key=True),
    "openai-responses": lambda r: r.to_openai_responses(model="gpt-5.6"),
}

# What each format renders per canonical message: the items the segmenter walks.
WIRE_MESSAGES: dict[str, Callable[[Any], tuple[bytes, ...]]] = {
    "anthropic": anthropic.message_blocks,
    "openai-chat": openai_chat.message_bytes,
    "openai-responses": openai_responses.item_bytes,
}
WIRE_TOOL: dict[str, Callable[[Any], dict[str, Any]]] = {
    "anthropic": anthropic.tool,
    "openai-chat": openai_chat.tool,
    "openai-responses": openai_responses.tool,
}


@pytest.mark.parametrize("fmt", sorted(RENDER))
def test_segmenting_a_rendered_body_gives_the_rendered_segments(fmt: str) -> None:
    """Tools, system blocks, history and tail come back one for one, in rendered order."""
    rendered = _conversation().render(tail={"now": "10:00"})
    request = RENDER[fmt](rendered)
    assert request.wire_format == fmt and endpoint(request.path) == fmt
    assert detect(request.body, request.path) == fmt
    segmented = segment_request(fmt, loads(request.content))
    assert segmented.data == request.data and segmented.fingerprint == request.fingerprint
    segs = [s for s in segmented.segments if s.kind != "param"]

    def data(seg: Any, whole: bytes = segmented.data) -> bytes:
        return whole[seg.start:seg.end]

    assert next(s.name for s in segmented.segments if s.kind == "param") == "param:model"

    tools = [s for s in segs if s.kind == "tool"]
    head_tools = [s for s in rendered.segments if s.kind == "tool"]
    assert [s.label for s in tools] == [s.label for s in head_tools] == ["get_weather", "search"]
    assert [data(s) for s in tools] == [
        canonical_json(WIRE_TOOL[fmt](t)) for t in rendered.head.tools]
    if fmt == "anthropic":  # the canonical tool form *is* Anthropic's shape
        assert [data(s) for s in tools] == [data(s, rendered.data) for s in head_tools]

    system = [s for s in segs if s.kind == "system"]
    texts = [loads(data(s)).get("text") or loads(data(s)).get("block", {}).get("text")
             for s in system]
    assert [t for t in texts if t] == list(rendered.head.system)

    messages = [s for s in segs if s.kind == "message"]
    history = [m for m in rendered.messages]
    wire_items = [item for m in history for item in WIRE_MESSAGES[fmt](m)]
    if fmt == "anthropic":
        # One segment per content block; the last user message also carries the tail block.
        blocks = [loads(data(s))["block"] for s in messages]
        expected = [loads(b) for b in wire_items]
        assert blocks[: len(expected)] == expected
        assert blocks[len(expected):] == [{"text": "<now>\n10:00\n</now>", "type": "text"}]
    else:
        # One item per rendered history item (+ the tail message); compare whole items.
        key = "messages" if fmt == "openai-chat" else "input"
        items = request.body[key]
        lead = 1  # the system/developer message
        assert [canonical_json(i) for i in items[lead:lead + len(wire_items)]] == wire_items
        tail = items[-1]["content"]
        assert (tail if isinstance(tail, str) else tail[0]["text"]) == "<now>\n10:00\n</now>"
        assert len(items) == lead + len(wire_items) + 1


@pytest.mark.parametrize("fmt", sorted(RENDER))
def test_append_only_turns_share_the_whole_previous_prefix(fmt: str) -> None:
    """A later turn's segments start with every non-tail segment of the earlier one."""
    conv = _conversation()
    first = RENDER[fmt](conv.render(tail={"now": "a"}))
    conv.assistant("Rome is 21C.")
    conv.user("Thanks.")
    second = RENDER[fmt](conv.render(tail={"now": "b"}))
    a = [s.digest for s in first.segments]
    b = [s.digest for s in second.segments]
    shared = 0
    while shared < min(len(a), len(b)) and a[shared] == b[shared]:
        shared += 1
    # The tail's segments, and Anthropic's end-of-history block (its marker moved on).
    tail_like = {"anthropic": 2, "openai-chat": 1, "openai-responses": 2}[fmt]
    assert shared >= len(a) - tail_like


@pytest.mark.parametrize(("path", "expected"), [
    ("/v1/messages", "anthropic"),
    ("/anthropic/v1/messages", "anthropic"),
    ("/proxy/messages", "anthropic"),
    ("/messages", "anthropic"),
    ("/v1/chat/completions", "openai-chat"),
    ("/openai/v1/chat/completions/", "openai-chat"),
    ("/v1/responses", "openai-responses"),
    ("/v1/threads/t1/messages", None),
    ("/v1/chat/completions/c1/messages", None),
    ("/v1/messages/count_tokens", None),
    ("/v1/models", None),
])
def test_one_path_rule_for_recording_detection_and_captures(
        path: str, expected: str | None, tmp_path: Path) -> None:
    """The recorder, format detection and the capture reader read a path the same way
    (``/proxy/messages`` used to be an endpoint only for the recorder, and
    ``/v1/threads/t1/messages`` only for captures)."""
    assert endpoint(path) == expected
    assert Recorder.recordable(path) is (expected is not None)
    body = {"messages": [{"role": "user", "content": "hi"}], "model": "m", "max_tokens": 1}
    if expected is not None:
        assert detect(body, path) == expected
    elif "/v1" in path:
        assert detect(body, path) is None
    # A HAR entry whose body is not JSON: a problem at an endpoint, skipped elsewhere.
    har = {"log": {"entries": [{"request": {
        "method": "POST", "url": f"https://api.example.com{path}",
        "postData": {"mimeType": "application/json", "text": "not json"}}}]}}
    capture = tmp_path / "capture.har"
    capture.write_bytes(canonical_json(har))
    (item,) = list(iter_capture(capture))
    assert isinstance(item, CaptureProblem) is (expected is not None)
    assert isinstance(item, Skipped) is (expected is None)
