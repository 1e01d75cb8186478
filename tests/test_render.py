"""Tests for provider request bodies rendered from a conversation."""

from __future__ import annotations

import dataclasses
import json
import pickle
from typing import Any

import pytest

from stableprompt import (
    BreakpointError,
    CanonicalizationError,
    InputError,
    PromptBuilder,
    ProviderRequest,
    Tool,
    canonical_json,
    diff,
)
from stableprompt._wire._formats import segment_request

WEATHER = Tool("get_weather", "Weather for a city.",
               {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]})


def _conv(head_ttl: str = "5m") -> Any:
    head = (PromptBuilder(tokenizer=None).system("Be brief.").tools([WEATHER])
            .tail_slot("now").freeze(head_ttl=head_ttl))
    conv = head.conversation()
    conv.user("Weather in Paris?")
    conv.assistant("Checking.", tool_calls=[{"id": "t1", "name": "get_weather",
                                             "arguments": {"city": "Paris"}}])
    conv.tool_result("t1", "18C")
    return conv


def test_anthropic_body_shape() -> None:
    """Tools, system and messages render in Anthropic's shape; tail is the last block."""
    body = _conv().render(tail={"now": "10:00"}).to_anthropic(
        model="claude-sonnet-4-5", max_tokens=100, temperature=0).body
    assert list(body) == ["max_tokens", "messages", "model", "system", "temperature", "tools"]
    assert body["tools"] == [{"description": "Weather for a city.", "input_schema": {
        "properties": {"city": {"type": "string"}}, "required": ["city"], "type": "object"},
        "name": "get_weather"}]
    assert body["system"] == [{"cache_control": {"type": "ephemeral"}, "text": "Be brief.",
                               "type": "text"}]
    user, assistant, results = body["messages"]
    assert user == {"content": [{"text": "Weather in Paris?", "type": "text"}], "role": "user"}
    assert assistant["content"][1] == {"id": "t1", "input": {"city": "Paris"},
                                       "name": "get_weather", "type": "tool_use"}
    assert results["role"] == "user"
    assert results["content"][0] == {"cache_control": {"type": "ephemeral"}, "content": "18C",
                                     "tool_use_id": "t1", "type": "tool_result"}
    assert results["content"][1] == {"text": "<now>\n10:00\n</now>", "type": "text"}


def test_anthropic_breakpoints_follow_history() -> None:
    """The history breakpoint moves forward each turn; the head breakpoint stays."""
    conv = _conv()
    first = conv.render(tail={"now": "a"}).to_anthropic(model="m", max_tokens=5)
    conv.assistant("It is 18C.")
    conv.user("Thanks")
    second = conv.render(tail={"now": "b"}).to_anthropic(model="m", max_tokens=5)
    marks = [s.name for s in second.segments if s.breakpoint]
    assert marks == ["system[0]", "messages[4].content[0]"]
    # Only the tail after the breakpoint differs, and the request knows its tail: a prefix.
    assert diff(first, second) is None


def test_anthropic_carry_breakpoint_beyond_lookback() -> None:
    """When a turn adds 20+ blocks, a breakpoint stays at the previous position."""
    conv = _conv()
    conv.render(tail={"now": "a"})
    for i in range(12):
        conv.assistant(f"step {i}")
        conv.user(f"go on {i}")
    body = conv.render(tail={"now": "b"}).to_anthropic(model="m", max_tokens=5)
    marks = [s.name for s in body.segments if s.breakpoint]
    assert marks == ["system[0]", "messages[2].content[0]", "messages[26].content[0]"]


def test_user_breakpoints_kept_and_budget() -> None:
    """User breakpoints are kept; more than 4 raise BreakpointError."""
    conv = _conv()
    conv.user("pinned doc", cache_breakpoint="5m")
    conv.assistant("ok")
    body = conv.render(tail={"now": "x"}).to_anthropic(model="m", max_tokens=5)
    assert [s.name for s in body.segments if s.breakpoint] == [
        "system[0]", "messages[2].content[1]", "messages[3].content[0]"]
    for i in range(4):
        conv.user(f"doc {i}", cache_breakpoint="5m")
    with pytest.raises(BreakpointError) as info:
        conv.render(tail={"now": "x"}).to_anthropic(model="m", max_tokens=5)
    assert info.value.code == "breakpoint-budget"


def test_ttl_order_enforced() -> None:
    """A 1h breakpoint after a 5m one raises; a 1h head before 5m history is fine."""
    conv = _conv()
    conv.user("long-lived", cache_breakpoint="1h")
    with pytest.raises(BreakpointError) as info:
        conv.render(tail={"now": "x"}).to_anthropic(model="m", max_tokens=5)
    assert info.value.code == "breakpoint-ttl-order"
    ok = _conv(head_ttl="1h").render(tail={"now": "x"}).to_anthropic(model="m", max_tokens=5)
    assert ok.body["system"][0]["cache_control"] == {"ttl": "1h", "type": "ephemeral"}


def test_param_clash() -> None:
    """Passing a renderer-owned field as a param raises InputError."""
    with pytest.raises(InputError) as info:
        _conv().render(tail={"now": "x"}).to_anthropic(model="m", max_tokens=5, messages=[])
    assert info.value.code == "render-param-clash"


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat", "openai-responses"])
def test_the_body_around_the_history_follows_each_renders_params(fmt: str) -> None:
    """The bytes before and after the history array are joined once per model and params
    (the envelope): a later render with other params, model or limit gets its own, and a
    bad or clashing param raises every time, not only the first."""
    conv = _conv()

    def render(model: str = "m", **params: Any) -> Any:
        prompt = conv.render(tail={"now": "x"})
        if fmt == "anthropic":
            return prompt.to_anthropic(model=model, max_tokens=params.pop("max_tokens", 5),
                                       **params)
        if fmt == "openai-chat":
            return prompt.to_openai_chat(model=model, **params)
        return prompt.to_openai_responses(model=model, **params)

    cases: list[dict[str, Any]] = [
        {}, {"stream": True}, {}, {"metadata": {"user_id": "u1"}, "stream": False},
        {"stream": False, "metadata": {"user_id": "u1"}}, {"metadata": {"user_id": "u2"}},
        {"model": "other"}, {"temperature": 0.5}]
    if fmt == "anthropic":
        cases += [{"max_tokens": 7}, {"max_tokens": 5}]
    else:
        cases += [{"prompt_cache_key": "k1"}, {"prompt_cache_key": "k2"}, {}]
    for case in cases:
        params = dict(case)
        model = params.pop("model", "m")
        request = render(model, **dict(params))
        body = json.loads(request.content)
        assert request.content == canonical_json(body)
        assert body["model"] == model
        for key, value in params.items():
            assert body[key] == value, (case, key)
        extra = set(body) - {"model", "max_tokens", "messages", "input", "system", "tools"}
        assert extra == set(params) - {"max_tokens"}, case
        assert request.fingerprint == segment_request(fmt, body).fingerprint
    clashing: dict[str, Any] = {"messages" if fmt != "openai-responses" else "input": []}
    for _ in range(2):
        with pytest.raises(InputError) as info:
            render("m", **clashing)
        assert info.value.code == "render-param-clash"
        with pytest.raises(CanonicalizationError) as bad:
            render(metadata={"x": float("nan")})
        assert bad.value.pointer == "/metadata/x"


def test_turn_objects_hold_every_field() -> None:
    """The prompt and request made every turn (without their dataclass ``__init__``) hold
    every field, compare and pickle as ones made through it."""
    prompt = _conv().render(tail={"now": "x"})
    names = {f.name for f in dataclasses.fields(prompt)}
    assert names <= prompt.__dict__.keys()
    for request in (prompt.to_anthropic(model="m", max_tokens=5),
                    prompt.to_openai_chat(model="m"), prompt.to_openai_responses(model="m")):
        assert {f.name for f in dataclasses.fields(request)} <= request.__dict__.keys()
        made = ProviderRequest(request.wire_format, request.path, request.content,
                               request.tail_count)
        assert request == made and hash(request) == hash(made)
        assert pickle.loads(pickle.dumps(request)) == request
    assert pickle.loads(pickle.dumps(prompt)).to_anthropic(
        model="m", max_tokens=5).content == prompt.to_anthropic(model="m", max_tokens=5).content


def test_openai_chat_body() -> None:
    """OpenAI chat: system first, tool calls with canonical arguments, tail user message last."""
    request = _conv().render(tail={"now": "t"}).to_openai_chat(model="gpt-4.1",
                                                               prompt_cache_key=True)
    body = request.body
    assert body["messages"][0] == {"content": "Be brief.", "role": "system"}
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "arguments": '{"city":"Paris"}', "name": "get_weather"}
    assert body["messages"][3] == {"content": "18C", "role": "tool", "tool_call_id": "t1"}
    assert body["messages"][-1] == {"content": "<now>\nt\n</now>", "role": "user"}
    assert body["tools"][0]["type"] == "function"
    assert body["prompt_cache_key"].startswith("sp-")
    assert request.path == "/v1/chat/completions"


def test_openai_responses_body() -> None:
    """OpenAI Responses: developer message, function_call and function_call_output items."""
    body = _conv().render(tail={"now": "t"}).to_openai_responses(model="gpt-5.6").body
    kinds = [item.get("type") for item in body["input"]]
    assert kinds == ["message", "message", "message", "function_call", "function_call_output",
                     "message"]
    assert body["input"][0]["role"] == "developer"
    assert body["input"][3] == {"arguments": '{"city":"Paris"}', "call_id": "t1",
                                "name": "get_weather", "type": "function_call"}


def test_request_fingerprint_covers_params() -> None:
    """Model and tool_choice are part of the request fingerprint; max_tokens is not."""
    rendered = _conv().render(tail={"now": "t"})
    base = rendered.to_anthropic(model="m", max_tokens=5)
    assert base.fingerprint == rendered.to_anthropic(model="m", max_tokens=99).fingerprint
    assert base.fingerprint != rendered.to_anthropic(model="m2", max_tokens=5).fingerprint
    assert base.fingerprint != rendered.to_anthropic(
        model="m", max_tokens=5, tool_choice={"type": "any"}).fingerprint
    assert base.head_fingerprint != rendered.to_anthropic(model="m2", max_tokens=5).head_fingerprint
    assert segment_request("anthropic", base.body).fingerprint == base.fingerprint


def test_compaction_keeps_head_and_reports_event() -> None:
    """compact() replaces history only and reports invalidated and surviving tokens."""
    head = (PromptBuilder().system("Be brief.").tools([WEATHER]).freeze())
    conv = head.conversation()
    for i in range(6):
        conv.user(f"question {i} " * 20)
        conv.assistant(f"answer {i} " * 20)
    before = conv.render()
    summary_request = conv.summarization_request()
    assert diff(before, summary_request) is None  # cache-safe: same prefix
    event = conv.compact("User asked six questions; all answered.", start=0, end=8)
    after = conv.render()
    assert after.head_fingerprint == before.head_fingerprint
    assert event.surviving_tokens == head.tokens
    assert event.invalidated_tokens == sum(
        s.tokens or 0 for s in before.segments if s.kind == "message")
    assert event.saved_tokens_per_turn is not None and event.saved_tokens_per_turn > 0
    assert len(conv.messages) == 5
    d = diff(before, after)
    assert d is not None and d.segment == "messages[0]" and d.cause == "history-rewrite"


def test_bodies_match_official_sdk_request_types() -> None:
    """Rendered bodies validate against the official anthropic/openai SDK request types."""
    from anthropic.types import MessageCreateParams
    from openai.types.chat import CompletionCreateParams
    from openai.types.responses import ResponseInputItemParam
    from pydantic import TypeAdapter

    rendered = _conv().render(tail={"now": "t"})
    TypeAdapter(MessageCreateParams).validate_python(
        rendered.to_anthropic(model="claude-sonnet-5", max_tokens=100).body)
    TypeAdapter(CompletionCreateParams).validate_python(
        rendered.to_openai_chat(model="gpt-5.2").body)
    items = rendered.to_openai_responses(model="gpt-5.6").body["input"]
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseInputItemParam)
    for item in items:
        adapter.validate_python(item, strict=True)


def test_user_breakpoints_never_silently_evict_the_history_breakpoint() -> None:
    """Four user breakpoints on earlier messages fill Anthropic's budget of 4: the SDK's
    end-of-history breakpoint would be dropped, so rendering raises naming them (the SDK's
    head breakpoint yields first, silently, as documented); marking the last message is fine
    (issue 14 item 4)."""
    conv = _conv()
    for i in range(4):
        conv.user(f"doc {i}", cache_breakpoint="5m")
        conv.assistant("ok")
    conv.user("question")
    with pytest.raises(BreakpointError) as info:
        conv.render(tail={"now": "x"}).to_anthropic(model="m", max_tokens=5)
    assert info.value.code == "breakpoint-evicts-history"
    assert info.value.segment == f"messages[{len(conv.messages) - 1}]"
    assert "messages[3]" in str(info.value)
    ok = _conv()
    ok.user("doc 0", cache_breakpoint="5m")
    for i in range(1, 4):
        ok.assistant("ok")
        ok.user(f"doc {i}", cache_breakpoint="5m")  # the last one ends the history
    body = ok.render(tail={"now": "x"}).to_anthropic(model="m", max_tokens=5)
    assert len([s for s in body.segments if s.breakpoint]) == 4


def test_a_breakpoint_below_the_minimum_warns_and_is_not_spent() -> None:
    """On a known model, the SDK does not place its head / history breakpoint on a prefix
    surely below the model's minimum (policy data), warns once per head, model and place,
    and places it as soon as the prefix is long enough (issue 14 item 4)."""
    import warnings

    from stableprompt import BreakpointWarning, cache_rules

    model = "claude-sonnet-4-5"
    minimum = cache_rules("anthropic", model).min_cacheable_tokens
    conv = PromptBuilder(system="Be brief.").freeze().conversation()
    conv.user("hi")
    with pytest.warns(BreakpointWarning) as caught:
        short = conv.render().to_anthropic(model=model, max_tokens=5)
    assert [(w.message.code, w.message.segment, w.message.minimum)  # type: ignore[union-attr]
            for w in caught] == [("breakpoint-below-minimum", "system[0]", minimum),
                                 ("breakpoint-below-minimum", "messages[0]", minimum)]
    assert short.segmented.breakpoints == ()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: the next turns are quiet
        conv.assistant("ok")
        conv.user("word " * 2 * minimum)
        grown = conv.render().to_anthropic(model=model, max_tokens=5)
    assert [s.name for s in grown.segmented.breakpoints] == ["messages[2].content[0]"]
    # Unknown models and heads without token counts keep every breakpoint, without a word.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for tokenizer, name in ((None, model), ("cl100k_base", "claude-future-9")):
            other = PromptBuilder(system="Be brief.", tokenizer=tokenizer).freeze()
            talk = other.conversation()
            talk.user("hi")
            request = talk.render().to_anthropic(model=name, max_tokens=5)
            assert len(request.segmented.breakpoints) == 2


def test_envelopes_share_the_heads_bytes() -> None:
    """Renders with params that change every request (a per-user ``metadata``) keep one
    envelope each, made of the head's own tools and system bytes objects, not copies of
    them (a 260 KB head kept 32 copies per format before)."""
    conv = _conv()
    for i in range(40):
        prompt = conv.render(tail={"now": str(i)})
        prompt.to_anthropic(model="m", max_tokens=5, metadata={"user_id": f"u{i}"})
        prompt.to_openai_chat(model="m", metadata={"user_id": f"u{i}"})
    head = conv.head
    (fields, envelopes), = head.wire_memo["anthropic-head-fields"].values()
    assert 0 < len(envelopes) <= 32
    for before, after in envelopes.values():
        big = [piece for piece in (*before, *after) if len(piece) > 100]
        assert big and all(any(piece is field for field in fields.values()) for piece in big)
    tools = head.wire_memo["openai-chat-tools"]
    for before, after in head.wire_memo["openai-chat-tools-envelopes"].values():
        assert [piece for piece in (*before, *after) if len(piece) > 100] == [tools]


@pytest.mark.parametrize("fmt", ["openai-chat", "openai-responses"])
def test_a_response_schema_keeps_its_properties_order(fmt: str) -> None:
    """A ``response_format`` / ``text.format`` schema is rendered with its ``properties`` in
    the order written (Structured Outputs write the fields in that order), every other key
    sorted; another order is another request (another fingerprint), the same order the same
    bytes every time."""
    def schema(names: list[str]) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": False, "required": names,
                "properties": {n: {"type": "string", "description": n} for n in names}}

    def render(names: list[str]) -> ProviderRequest:
        prompt = _conv().render(tail={"now": "10:00"})
        made: ProviderRequest
        if fmt == "openai-chat":
            made = prompt.to_openai_chat(model="gpt-5.6", response_format={
                "type": "json_schema", "json_schema": {"name": "w", "strict": True,
                                                       "schema": schema(names)}})
        else:
            made = prompt.to_openai_responses(model="gpt-5.6", text={"format": {
                "type": "json_schema", "name": "w", "strict": True, "schema": schema(names)}})
        return made

    zyx, xyz = render(["zeta", "alpha"]), render(["alpha", "zeta"])
    key = "response_format" if fmt == "openai-chat" else "text"
    holder = zyx.body[key]
    found = holder["json_schema"]["schema"] if fmt == "openai-chat" else \
        holder["format"]["schema"]
    assert list(found["properties"]) == ["zeta", "alpha"]
    assert list(found) == sorted(found) and list(holder) == sorted(holder)
    assert b'"properties":{"zeta":{"description":"zeta","type":"string"},"alpha"' in zyx.content
    assert zyx.content == render(["zeta", "alpha"]).content
    assert zyx.fingerprint != xyz.fingerprint
    d = diff(segment_request(fmt, xyz.body), segment_request(fmt, zyx.body))
    assert d is not None and d.cause == "param-change" and "reordered" in d.detail
