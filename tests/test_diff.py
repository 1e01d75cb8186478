"""Tests for LCP and first-divergence cause analysis on request bodies."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from stableprompt import InputError, ProviderRequest
from stableprompt._diff import diff, lcp_bytes
from stableprompt._wire._formats import segment_request

TOOLS: list[dict[str, Any]] = [
    {"name": "get_weather", "description": "Weather for a city.",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                      "required": ["city"]}},
    {"name": "search", "description": "Search the web.",
     "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
]


def _body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "tools": copy.deepcopy(TOOLS),
        "system": [{"type": "text", "text": "You are a careful agent. Be brief."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "get_weather",
                 "input": {"city": "Paris", "unit": "C"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": "18C\n"}]},
        ],
    }
    body.update(changes)
    return body


def _seg(body: dict[str, Any]) -> Any:
    return segment_request("anthropic", body)


def test_append_only_is_prefix() -> None:
    """Appending a message to the predecessor gives no divergence."""
    a = _body()
    b = _body(messages=[*a["messages"], {"role": "assistant", "content": "ok"}])
    assert diff(_seg(a), _seg(b)) is None
    assert lcp_bytes(_seg(a), _seg(b)) == len(_seg(a).data)


def test_volatile_timestamp_in_system() -> None:
    """A timestamp edit in the system prompt is a volatile-token divergence in system[0]."""
    a = _body(system=[{"type": "text", "text": "Now: 2026-11-30T10:00:00Z. Be brief."}])
    b = _body(system=[{"type": "text", "text": "Now: 2026-11-30T10:05:00Z. Be brief."}])
    d = diff(_seg(a), _seg(b))
    assert d is not None
    assert (d.cause, d.segment, d.path) == ("volatile-token", "system[0]", "/system/0/text")
    assert d.detail == "timestamp"
    sa = _seg(a)
    start = sa.segments[d.segment_index].start
    assert sa.data[start:d.offset].endswith(b"2026-11-30T10:0")
    assert "10:00" in d.snippet_a and "10:05" in d.snippet_b


def test_tool_reorder() -> None:
    """Tools in a different order are a tool-reorder at the first tool."""
    d = diff(_seg(_body()), _seg(_body(tools=list(reversed(copy.deepcopy(TOOLS))))))
    assert d is not None
    start = _seg(_body()).segments[1].start
    assert (d.cause, d.segment, d.path) == ("tool-reorder", "tools[0]", "/tools/0")
    assert d.offset == start + len('{"name":"')


def test_tool_added_and_removed() -> None:
    """A missing tool is tool-removed; an extra one is tool-added."""
    d = diff(_seg(_body()), _seg(_body(tools=copy.deepcopy(TOOLS[:1]))))
    assert d is not None and d.cause == "tool-removed" and d.detail == "search"
    extra = {"name": "calc", "description": "C", "input_schema": {"type": "object"}}
    d = diff(_seg(_body()), _seg(_body(tools=[extra, *copy.deepcopy(TOOLS)])))
    assert d is not None and d.cause == "tool-added" and d.detail == "calc"


def test_key_order_in_schema() -> None:
    """Re-ordered schema keys are key-order, with the path of the re-ordered object."""
    tools = copy.deepcopy(TOOLS)
    schema = tools[0]["input_schema"]
    tools[0]["input_schema"] = {"required": schema["required"], "type": "object",
                                "properties": schema["properties"]}
    d = diff(_seg(_body()), _seg(_body(tools=tools)))
    assert d is not None
    assert (d.cause, d.segment, d.path) == ("key-order", "tools[0]", "/tools/0/input_schema")


def test_key_order_in_tool_use_input() -> None:
    """Re-ordered keys in an already-sent tool_use input are key-order in that message."""
    b = _body()
    b["messages"][1]["content"][0]["input"] = {"unit": "C", "city": "Paris"}
    d = diff(_seg(_body()), _seg(b))
    assert d is not None
    assert (d.cause, d.segment, d.path) == ("key-order", "messages[1].content[0]",
                                            "/messages/1/content/0/input")


def test_whitespace_in_system() -> None:
    """Whitespace-only changes in system are whitespace."""
    d = diff(_seg(_body()), _seg(_body(system=[
        {"type": "text", "text": "You are a careful agent.  Be brief."}])))
    assert d is not None and d.cause == "whitespace" and d.path == "/system/0/text"


def test_history_rewrite_trailing_newline_and_string_form() -> None:
    """An already-sent message changed (trailing newline dropped, string vs blocks) is a
    history-rewrite."""
    b = _body()
    b["messages"][2]["content"][0]["content"] = "18C"
    d = diff(_seg(_body()), _seg(b))
    assert d is not None
    assert (d.cause, d.segment, d.path) == ("history-rewrite", "messages[2].content[0]",
                                            "/messages/2/content/0/content")
    c = _body()
    c["messages"][0]["content"] = "Weather in Paris?"
    d = diff(_seg(_body()), _seg(c))
    assert d is not None and d.cause == "history-rewrite" and d.segment == "messages[0].content[0]"


def test_history_truncated() -> None:
    """A later request with fewer messages (history dropped) is a history-delete at the
    first message left out."""
    a = _body()
    d = diff(_seg(a), _seg(_body(messages=a["messages"][:1])))
    assert d is not None and (d.cause, d.path) == ("history-delete", "/messages/1")


def test_model_and_param_change() -> None:
    """A model switch is model-change; a tool_choice change is param-change."""
    d = diff(_seg(_body()), _seg(_body(model="claude-opus-4-5")))
    assert d is not None
    assert (d.cause, d.path, d.offset) == ("model-change", "/model", len('"claude-'))
    d = diff(_seg(_body()), _seg(_body(tool_choice={"type": "any"})))
    assert d is not None and (d.cause, d.detail) == ("param-change", "tool_choice")


def test_content_edit() -> None:
    """A plain edit of the system text is content-edit."""
    d = diff(_seg(_body()), _seg(_body(system=[{"type": "text", "text": "You are a bold agent."}])))
    assert d is not None and d.cause == "content-edit"


@pytest.mark.parametrize("n", [1, 7, 50])
def test_binary_search_finds_first_divergence(n: int) -> None:
    """The first divergent message is found among many equal ones."""
    msgs = [{"role": "user", "content": f"m{i}"} for i in range(60)]
    changed = copy.deepcopy(msgs)
    changed[n]["content"] = "edited"
    d = diff(_seg(_body(messages=msgs)), _seg(_body(messages=changed)))
    assert d is not None and d.segment == f"messages[{n}]" and d.path == f"/messages/{n}/content"


def test_requests_without_cache_key_params_are_still_requests() -> None:
    """A request body with no ``model`` (no param segments) is compared as a request, not
    mistaken for a provider-neutral render (``diff-mismatch``)."""
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    bare = segment_request("anthropic", {"messages": messages})
    full = segment_request("anthropic", {"model": "m", "messages": messages})
    assert diff(bare, bare) is None
    assert diff(bare, full) is not None


def test_requests_of_different_wire_formats_are_a_typed_mismatch() -> None:
    """An Anthropic request against an OpenAI Chat request is ``diff-mismatch`` naming both
    formats, not a content-edit divergence; a bad argument is still ``diff-type``."""
    from stableprompt import PromptBuilder

    conv = PromptBuilder(system="You bill.", tokenizer=None).freeze().conversation()
    conv.user("Show invoice 7.")
    prompt = conv.render()
    anthropic_request = prompt.to_anthropic(model="claude-sonnet-4-5", max_tokens=64)
    chat_request = prompt.to_openai_chat(model="gpt-5.2")
    with pytest.raises(InputError) as info:
        diff(anthropic_request, chat_request)
    assert info.value.code == "diff-mismatch"
    assert "a is anthropic, b is openai-chat" in info.value.message
    with pytest.raises(InputError) as info:
        diff(segment_request("openai-chat", _chat_body()), _seg(_body()))
    assert info.value.code == "diff-mismatch" and "a is openai-chat" in info.value.message
    with pytest.raises(InputError) as info:
        diff(anthropic_request, {"model": "m"})  # type: ignore[arg-type]
    assert info.value.code == "diff-type"


def _chat_body() -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


_TAIL_TOOL = {"name": "get_invoice", "description": "Fetch an invoice.",
              "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}}


def _tail_requests(fmt: str, *, rewrite: bool = False) -> tuple[Any, Any]:
    """Two consecutive requests of one tool-calling turn, each with its own tail value."""
    from stableprompt import PromptBuilder

    head = PromptBuilder(system="You bill.", tools=[_TAIL_TOOL], tail_slots=["now"],
                         tokenizer=None).freeze()

    def render(conv: Any, now: str) -> Any:
        prompt = conv.render(tail={"now": now})
        if fmt == "anthropic":
            return prompt.to_anthropic(model="claude-sonnet-5", max_tokens=64)
        if fmt == "openai-chat":
            return prompt.to_openai_chat(model="gpt-5.2")
        return prompt.to_openai_responses(model="gpt-5.2")

    conv = head.conversation()
    conv.user("Show invoice 7.")
    first = render(conv, "10:00")
    if rewrite:
        conv = head.conversation()
        conv.user("Show invoice 8.")
    conv.assistant(tool_calls=[{"id": "c1", "name": "get_invoice", "arguments": {"id": "7"}}])
    conv.tool_result("c1", "12.50 EUR")
    return first, render(conv, "10:01")


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat", "openai-responses"])
def test_requests_know_their_tail_so_append_only_turns_diff_to_none(fmt: str) -> None:
    """A request rendered by the SDK carries its tail segments: the next turn's request,
    which has new history where this one had its tail, is a prefix extension (``None``)."""
    first, second = _tail_requests(fmt)
    assert first.tail_segments and second.tail_segments
    assert all(first.segments[-len(first.tail_segments):][i] == s
               for i, s in enumerate(first.tail_segments))
    assert diff(first, second) is None
    assert lcp_bytes(first, second) == first.tail_segments[0].start
    copied = pickle.loads(pickle.dumps(first))
    assert copied.tail_segments == first.tail_segments and diff(copied, second) is None
    # A body captured elsewhere knows no tail: the same pair is then a divergence in the tail.
    bare = ProviderRequest(first.wire_format, first.path, first.content)
    assert bare.tail_segments == () and diff(bare, second) is not None


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat", "openai-responses"])
def test_a_real_rewrite_is_still_found_before_the_tail(fmt: str) -> None:
    """Ignoring the tail never hides a change to already-sent history; offsets are in the
    predecessor's segment data."""
    first, second = _tail_requests(fmt, rewrite=True)
    divergence = diff(first, second)
    assert divergence is not None and divergence.cause == "history-rewrite"
    segment = first.segments[divergence.segment_index]
    assert segment.start <= divergence.offset < segment.end
    assert first.data[divergence.offset:divergence.offset + 1] == b"7"
    with pytest.raises(InputError) as info:
        diff(first.body, second)  # a dict is not segmented: typed error
    assert info.value.code == "diff-type"


def _clock_turn(stamp: str, *, marked: bool, second: bool) -> dict[str, Any]:
    """An Anthropic body whose last user message ends in a clock block (a breakpoint on it
    when ``marked``); ``second``: the next turn, where that block was left out."""
    clock: dict[str, Any] = {"type": "text", "text": f"Current time: {stamp}"}
    if marked:
        clock["cache_control"] = {"type": "ephemeral"}
    first = {"role": "user", "content": [{"type": "text", "text": "Plan my trip."}, clock]}
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 8,
                            "system": [{"type": "text", "text": "You plan trips."}],
                            "messages": [first]}
    if second:
        body["messages"] = [
            {"role": "user", "content": [{"type": "text", "text": "Plan my trip."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Where to?"}]},
            {"role": "user", "content": [{"type": "text", "text": "Rome."}, clock]}]
    return body


def test_a_breakpoint_on_a_per_turn_block_is_named() -> None:
    """The predecessor's breakpoint sat on a per-call clock block that the next request left
    out: ``breakpoint-on-per-turn-block`` (lint's finding of the same name, fix: the
    breakpoint on the last stable block), not a generic history rewrite; the underlying
    change is in the detail. Without the breakpoint it stays ``history-rewrite``."""
    a = segment_request("anthropic", _clock_turn("2026-11-30T10:00:00Z", marked=True,
                                                 second=False))
    b = segment_request("anthropic", _clock_turn("2026-11-30T10:05:00Z", marked=True,
                                                 second=True))
    d = diff(a, b)
    assert d is not None and d.cause == "breakpoint-on-per-turn-block"
    assert d.segment == "messages[0].content[1]"
    assert "was left out (history-rewrite" in d.detail
    plain_a = segment_request("anthropic", _clock_turn("2026-11-30T10:00:00Z", marked=False,
                                                       second=False))
    plain_b = segment_request("anthropic", _clock_turn("2026-11-30T10:05:00Z", marked=False,
                                                       second=True))
    plain = diff(plain_a, plain_b)
    assert plain is not None and plain.cause == "history-rewrite"


def test_a_marked_block_re_sent_as_a_string_changed_it_was_not_left_out() -> None:
    """Claude Code's traffic (tests/test_harness_cli.py): the environment block carrying the
    breakpoint is re-sent, without it, as the message's string content. The detail said
    the block "was left out"; it is still there, in another form."""
    env = "# Environment\nToday's date: 2026-12-07\nWorking directory: /tmp/x"
    hi: dict[str, Any] = {"role": "user", "content": "hi"}
    a = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [
        hi, {"role": "user", "content": [{"type": "text", "text": env,
                                          "cache_control": {"type": "ephemeral"}}]}]}
    b = {**a, "messages": [hi, {"role": "user", "content": env},
                           {"role": "assistant", "content": "ok"}]}
    d = diff(segment_request("anthropic", a), segment_request("anthropic", b))
    assert d is not None and d.cause == "breakpoint-on-per-turn-block"
    assert d.detail.startswith("the cache breakpoint sat on messages[1].content[0], which "
                               "changed (history-rewrite: messages[1].content[0] became "
                               "messages[1])"), d.detail


def test_the_label_is_the_token_at_the_first_difference() -> None:
    """A change labelled by the token at its first difference, not by a volatile token
    further on in the differing region: a working directory under a label the patterns do not
    know, whose checkout status also differs after the model line (Claude Code's environment
    block), is a content edit (it was ``volatile-token (model-name)``); a known working
    directory line is ``environment``; a clock changed at the first difference is a
    timestamp."""
    def system(directory: str, status: str, clock: str = "2026-12-07T10:00:00Z",
               label: str = "Primary working directory") -> dict[str, Any]:
        text = (f"{label}: {directory}\nIs directory a git repo: yes\n"
                f"You are powered by the model named claude-sonnet-4-5-20250929.\n"
                f"Status: {status}\nNow: {clock}")
        return {"model": "claude-sonnet-4-5", "max_tokens": 10,
                "system": [{"type": "text", "text": text}],
                "messages": [{"role": "user", "content": "hi"}]}

    moved = diff(_seg(system("/srv/project-a", "clean")),
                 _seg(system("/srv/other-b", "2 files modified")))
    assert moved is not None
    assert (moved.cause, moved.path) == ("content-edit", "/system/0/text")
    known = diff(_seg(system("/srv/project-a", "clean", label="Working directory")),
                 _seg(system("/srv/other-b", "2 files modified", label="Working directory")))
    assert known is not None and (known.cause, known.detail) == ("volatile-token", "environment")
    ticked = diff(_seg(system("/srv/a", "clean")),
                  _seg(system("/srv/a", "clean", "2026-12-07T10:05:00Z")))
    assert ticked is not None
    assert (ticked.cause, ticked.detail) == ("volatile-token", "timestamp")


def test_properties_reorder_is_a_property_order_change_not_key_order() -> None:
    """A captured strict tool (openai SDK) with its ``properties`` reversed is a
    ``property-order`` break (the model would write the fields in another order: not fixed by
    sorting keys), while the same schema with only its keywords reordered is ``key-order``;
    lint does not call authored ``properties`` order non-canonical."""
    from pathlib import Path

    from stableprompt._canonical import loads as load_json
    from stableprompt._diff import CAUSE_FIXES
    from stableprompt._lint._findings import _schema_key_problem
    from stableprompt._wire._formats import segment_request

    body = load_json((Path(__file__).parent / "fixtures" / "stabilize"
                      / "openai_strict_tool.json").read_bytes())
    schema = body["tools"][0]["function"]["parameters"]
    reversed_body = copy.deepcopy(body)
    props = reversed_body["tools"][0]["function"]["parameters"]["properties"]
    reversed_body["tools"][0]["function"]["parameters"]["properties"] = dict(
        reversed(list(props.items())))
    keywords_body = copy.deepcopy(body)
    keywords_body["tools"][0]["function"]["parameters"] = dict(reversed(list(schema.items())))
    a = segment_request("openai-chat", body)
    moved = diff(a, segment_request("openai-chat", reversed_body))
    assert moved is not None and moved.cause == "property-order"
    assert moved.path == "/tools/0/function/parameters/properties"
    assert "reasoning, confidence, answer -> answer, confidence, reasoning" in moved.detail
    assert "sorted keys" not in CAUSE_FIXES["property-order"]
    keys = diff(a, segment_request("openai-chat", keywords_body))
    assert keys is not None and keys.cause == "key-order"
    # the SDK's schema keeps its keywords unsorted ("title" after "required"), but its
    # properties' order is authored, never a finding
    problem = _schema_key_problem(body["tools"][0])
    assert problem is not None and "properties" not in problem.split(" start ")[0]
    sorted_keywords = copy.deepcopy(body["tools"][0])
    sorted_keywords["function"]["parameters"] = {
        k: ({n: dict(sorted(s.items())) for n, s in v.items()} if k == "properties" else v)
        for k, v in sorted(schema.items())}
    assert _schema_key_problem(sorted_keywords) is None
