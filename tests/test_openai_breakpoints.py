"""OpenAI explicit caching (issue 25, item 3): ``prompt_cache_breakpoint`` markers at the end
of the head and of the stable history, ``prompt_cache_options`` from arguments, for models
whose policy has explicit caching; budget and TTL order checked by the one placement rule."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from stableprompt import (
    BreakpointError,
    Conversation,
    InputError,
    PromptBuilder,
    ProviderRequest,
    RenderedPrompt,
    Tool,
    cache_rules,
    diff,
)
from stableprompt._canonical import loads
from stableprompt._policy import OPENAI_EXPLICIT_RULES
from stableprompt._wire._formats import segment_request
from stableprompt.emulator import Emulator, FakeClock

SEARCH = Tool("search", "Search the web.", {"type": "object", "properties": {
    "q": {"type": "string"}}, "required": ["q"]})
MODEL = "gpt-5.6"
MARK = "prompt_cache_breakpoint"


def _conversation(system: str = "Be brief.") -> Conversation:
    head = PromptBuilder(system=system, tools=[SEARCH], tail_slots={"now": False},
                         tokenizer=None).freeze()
    conv = head.conversation()
    conv.user("What is new?")
    return conv


def _chat(rendered: RenderedPrompt, **kw: Any) -> ProviderRequest:
    return rendered.to_openai_chat(model=kw.pop("model", MODEL), **kw)


def _responses(rendered: RenderedPrompt, **kw: Any) -> ProviderRequest:
    return rendered.to_openai_responses(model=kw.pop("model", MODEL), **kw)


def _marked(request: ProviderRequest) -> list[tuple[int, Any]]:
    """``(item index, marker)`` of every marked part of the history array."""
    key = "messages" if request.wire_format == "openai-chat" else "input"
    found = []
    for i, item in enumerate(request.body[key]):
        for field in ("content", "output"):
            parts = item.get(field)
            if isinstance(parts, list):
                found += [(i, p[MARK]) for p in parts if MARK in p]
    return found


def test_the_policy_has_the_documented_facts() -> None:
    """Explicit caching per API: TTL labels, write budgets, 80 considered, 1.25x / 2.5x
    writes, each with its source."""
    chat, responses = OPENAI_EXPLICIT_RULES["openai-chat"], OPENAI_EXPLICIT_RULES[
        "openai-responses"]
    assert chat.ttls == ("30m",) and responses.ttls == ("30m", "12h")
    assert (chat.written_explicit_mode, chat.written_implicit_mode, chat.considered) == (
        4, 3, 80)
    assert cache_rules("openai", MODEL).write_multipliers == {"30m": 1.25, "12h": 2.5}
    assert "openai-python" in chat.source and responses.as_of


@pytest.mark.parametrize("render", [_chat, _responses])
def test_markers_at_the_end_of_the_head_and_of_the_history(render: Any) -> None:
    """One marker on the system text, one on the last history message, none on the tail;
    ``prompt_cache_options`` carries the TTL."""
    conv = _conversation()
    request = render(conv.render(tail={"now": "1"}), prompt_cache_ttl="30m")
    assert _marked(request) == [(0, {"mode": "explicit"}), (1, {"mode": "explicit"})]
    assert request.body["prompt_cache_options"] == {"ttl": "30m"}
    segmented = segment_request(request.wire_format, loads(request.content))
    assert request.fingerprint == segmented.fingerprint
    key = "messages" if request.wire_format == "openai-chat" else "input"
    assert [s.name for s in segmented.segments if s.breakpoint] == [
        f"{key}[0].content[0]", f"{key}[1].content[0]"]


@pytest.mark.parametrize("render", [_chat, _responses])
def test_default_render_is_unchanged(render: Any) -> None:
    """Without the arguments nothing is added: no marker, no options (the golden bytes of
    requests that do not use the feature stay as they were)."""
    request = render(_conversation().render())
    assert _marked(request) == [] and "prompt_cache_options" not in request.body
    assert MARK.encode() not in request.content


@pytest.mark.parametrize("render", [_chat, _responses])
def test_turns_stay_a_prefix_of_each_other(render: Any) -> None:
    """The history breakpoint moves to the new last message each turn; the marker is not
    part of the cached bytes, and string content is sent as a text part in both turns, so
    the earlier request is a prefix of the later one (``diff`` finds no divergence)."""
    conv = _conversation()
    first = render(conv.render(tail={"now": "1"}), prompt_cache_ttl="30m")
    conv.assistant("Nothing much.")
    conv.user("And now?")
    second = render(conv.render(tail={"now": "2"}), prompt_cache_ttl="30m")
    assert diff(first, second) is None
    assert [i for i, _ in _marked(second)] == [0, 3]


def test_user_markers_count_against_the_write_budget() -> None:
    """User-placed breakpoints are kept (with the request's TTL) and counted: with the
    implicit breakpoint 3 explicit ones are written, so 3 user markers leave no room for the
    SDK's end-of-history one (``breakpoint-evicts-history``); ``explicit`` mode writes 4."""
    conv = _conversation()
    for i in range(3):
        conv.assistant(f"a{i}")
        conv.user(f"q{i}", cache_breakpoint="5m")
    conv.assistant("a")
    conv.user("last")
    rendered = conv.render()
    with pytest.raises(BreakpointError) as caught:
        _chat(rendered, prompt_cache_ttl="30m")
    assert caught.value.code == "breakpoint-evicts-history"
    request = _chat(rendered, prompt_cache_ttl="30m", prompt_cache_mode="explicit")
    assert len(_marked(request)) == 4  # the head's dropped first, as for Anthropic
    assert request.body["prompt_cache_options"] == {"mode": "explicit", "ttl": "30m"}
    conv.assistant("b")
    conv.user("more", cache_breakpoint="1h")
    conv.assistant("c")
    conv.user("again", cache_breakpoint="1h")
    with pytest.raises(BreakpointError) as caught:
        _chat(conv.render(), prompt_cache_ttl="30m", prompt_cache_mode="explicit")
    assert caught.value.code == "breakpoint-budget"


def test_ttl_order_longer_first() -> None:
    """A 12h history breakpoint after a 30m head one is refused (``breakpoint-ttl-order``);
    the reverse (12h head, 30m history) gives the history marker its own ``ttl``."""
    rendered = _conversation().render()
    with pytest.raises(BreakpointError) as caught:
        _responses(rendered, prompt_cache_ttl="30m", history_ttl="12h")
    assert caught.value.code == "breakpoint-ttl-order"
    request = _responses(rendered, prompt_cache_ttl="12h", history_ttl="30m")
    assert _marked(request) == [(0, {"mode": "explicit"}),
                                (1, {"mode": "explicit", "ttl": "30m"})]
    assert request.body["prompt_cache_options"] == {"ttl": "12h"}


def test_arguments_are_checked() -> None:
    """12h is Responses only; a model without explicit caching is refused by name;
    ``prompt_cache_options`` is not also taken as a param; the mode is one of two."""
    rendered = _conversation().render()
    with pytest.raises(InputError) as caught:
        _chat(rendered, prompt_cache_ttl="12h")
    assert caught.value.code == "render-param"
    with pytest.raises(InputError) as caught:
        _chat(rendered, model="gpt-5.2", prompt_cache_ttl="30m")
    assert caught.value.code == "render-explicit-cache" and "gpt-5.2" in str(caught.value)
    with pytest.raises(InputError):
        _chat(rendered, prompt_cache_ttl="30m", prompt_cache_options={"ttl": "30m"})
    with pytest.raises(InputError):
        _chat(rendered, prompt_cache_mode="eager")


def test_a_head_of_tools_only_has_no_head_marker() -> None:
    """A tool definition holds no content part: without system text only the history is
    marked."""
    head = PromptBuilder(tools=[SEARCH], tokenizer=None).freeze()
    conv = head.conversation()
    conv.user("hi")
    assert _marked(_chat(conv.render(), prompt_cache_ttl="30m")) == [(0, {"mode": "explicit"})]


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


def test_the_emulator_reads_the_marked_prefix(emu: Emulator) -> None:
    """Against the emulator (explicit mode: only markers write), turn 2 reads everything up
    to turn 1's history breakpoint; written tokens are billed once."""
    conv = _conversation(system=" ".join(f"rule {i}: keep the prefix." for i in range(300)))
    usages = []
    with httpx.Client(base_url=emu.openai_base_url,
                      headers={"authorization": "Bearer k"}) as http:
        for turn in range(3):
            request = _chat(conv.render(tail={"now": str(turn)}), prompt_cache_ttl="30m",
                            prompt_cache_mode="explicit")
            answer = http.post("/chat/completions", content=request.content,
                               headers={"content-type": "application/json"}).json()
            usages.append(answer["usage"])
            conv.add_response(answer)
            conv.user(f"question {turn}")
    details = [u["prompt_tokens_details"] for u in usages]
    assert details[0]["cached_tokens"] == 0 and details[0]["cache_write_tokens"] > 0
    for before, after, usage in zip(details, details[1:], usages[1:], strict=False):
        # the read is the previous request's whole marked prefix
        assert after["cached_tokens"] == before["cached_tokens"] + before["cache_write_tokens"]
        assert usage["prompt_tokens"] > after["cached_tokens"]
