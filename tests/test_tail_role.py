"""The volatile tail as a mid-conversation system message (issue 25, item 1): chosen per model
from ``_policy.model_features``, placed by the documented rules, overridable with
``tail_role=``, and never changing the head or the history's bytes."""

from __future__ import annotations

from typing import Any

import pytest

from stableprompt import (
    Conversation,
    InputError,
    PromptBuilder,
    ProviderRequest,
    RenderedPrompt,
    Tool,
    model_features,
)
from stableprompt._canonical import loads
from stableprompt._wire._formats import segment_request

SEARCH = Tool("search", "Search the web.", {"type": "object", "properties": {
    "q": {"type": "string"}}, "required": ["q"]})
SUPPORTED = "claude-opus-5"
UNSUPPORTED = "claude-sonnet-5"


def _conversation() -> Conversation:
    head = PromptBuilder(system="Be brief.", tools=[SEARCH], tail_slots=["now"],
                         tokenizer=None).freeze()
    conv = head.conversation()
    conv.user("What is new?")
    return conv


def _render(rendered: RenderedPrompt, model: str, **kw: Any) -> ProviderRequest:
    return rendered.to_anthropic(model=model, max_tokens=64, **kw)


def _messages(request: ProviderRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = request.body["messages"]
    return messages


def test_the_policy_table_names_the_documented_models() -> None:
    """Mid-conversation system messages: the nine documented models, not Sonnet 5, each entry
    with its source and date."""
    for model in ("claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5", "claude-mythos-5",
                  "claude-opus-5-5", "claude-opus-4-8", "claude-opus-5", "claude-sonnet-5-5",
                  "claude-haiku-5-5"):
        features = model_features("anthropic", model)
        assert features.system_messages, model
        assert "mid-conversation-system-messages" in features.source and features.as_of
    for model in ("claude-sonnet-5", "claude-sonnet-4-5", "claude-haiku-4-5", "claude-x"):
        assert not model_features("anthropic", model).system_messages, model
    assert model_features("anthropic", "claude-x").conservative


def test_supported_model_sends_the_tail_as_a_trailing_system_message() -> None:
    """On a supported model the tail is a ``role: system`` message after the last user turn."""
    request = _render(_conversation().render(tail={"now": "12:00"}), SUPPORTED)
    messages = _messages(request)
    assert [m["role"] for m in messages] == ["user", "system"]
    assert messages[1]["content"] == [{"text": "<now>\n12:00\n</now>", "type": "text"}]
    assert [s.path for s in request.tail_segments] == ["/messages/1/content/0"]


def test_unsupported_model_keeps_the_user_text_form() -> None:
    """Sonnet 5 (no system messages) gets the tail as user text in the last user turn."""
    request = _render(_conversation().render(tail={"now": "12:00"}), UNSUPPORTED)
    messages = _messages(request)
    assert [m["role"] for m in messages] == ["user"]
    assert messages[0]["content"][-1]["text"] == "<now>\n12:00\n</now>"


def test_the_choice_is_overridable() -> None:
    """``tail_role="user"`` forces the user form on a supported model, ``"system"`` the system
    form on one the table says lacks it (the table may lag the provider)."""
    rendered = _conversation().render(tail={"now": "1"})
    assert [m["role"] for m in _messages(_render(rendered, SUPPORTED, tail_role="user"))] \
        == ["user"]
    assert [m["role"] for m in _messages(_render(rendered, UNSUPPORTED, tail_role="system"))] \
        == ["user", "system"]


def test_head_and_history_bytes_do_not_depend_on_the_choice() -> None:
    """Both forms have the same head fingerprint and the same segments up to the tail: only
    the tail's own segments differ (the history's blocks are the same bytes)."""
    rendered = _conversation().render(tail={"now": "1"})
    user = _render(rendered, SUPPORTED, tail_role="user")
    system = _render(rendered, SUPPORTED, tail_role="system")
    assert user.head_fingerprint == system.head_fingerprint
    prefix = len(user.segments) - len(user.tail_segments)
    assert user.segments[:prefix] == system.segments[:prefix]
    assert [s.label for s in system.tail_segments] == ["system"]
    # the breakpoint sits on the last history block in both forms, before the tail
    for request in (user, system):
        marked = [s for s in request.segments if s.breakpoint]
        assert marked[-1].name == "messages[0].content[0]"


def test_fingerprints_equal_the_segmented_body() -> None:
    """The incrementally chained fingerprint of a system-tail request equals a from-scratch
    segmenting of its body."""
    request = _render(_conversation().render(tail={"now": "1"}), SUPPORTED)
    segmented = segment_request("anthropic", loads(request.content))
    assert request.fingerprint == segmented.fingerprint


def test_placement_after_an_assistant_turn_falls_back_or_raises() -> None:
    """A system message must follow a user turn: after an assistant turn the automatic choice
    is the user form, and a forced ``"system"`` raises ``render-tail-role``."""
    conv = _conversation()
    conv.assistant("Nothing.")
    rendered = conv.render(tail={"now": "1"})
    assert _messages(_render(rendered, SUPPORTED))[-1]["role"] == "user"
    with pytest.raises(InputError) as caught:
        _render(rendered, SUPPORTED, tail_role="system")
    assert caught.value.code == "render-tail-role"
    assert "must follow a user turn" in str(caught.value)


def test_placement_never_as_the_first_message() -> None:
    """A tail with no history cannot be a system message (never ``messages[0]``)."""
    head = PromptBuilder(system="Be brief.", tail_slots=["now"], tokenizer=None).freeze()
    rendered = head.conversation().render(tail={"now": "1"})
    assert _messages(_render(rendered, SUPPORTED)) == [
        {"content": [{"text": "<now>\n1\n</now>", "type": "text"}], "role": "user"}]
    with pytest.raises(InputError, match="messages\\[0\\]") as caught:
        _render(rendered, SUPPORTED, tail_role="system")
    assert caught.value.code == "render-tail-role"


def test_tool_results_are_a_user_turn() -> None:
    """After tool results (a user turn on the wire) the tail is a system message."""
    conv = _conversation()
    conv.assistant(tool_calls=[{"id": "c1", "name": "search", "arguments": {"q": "x"}}])
    conv.tool_result("c1", "found")
    messages = _messages(_render(conv.render(tail={"now": "1"}), SUPPORTED))
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "system"]


def test_no_tail_no_system_message() -> None:
    """Without tail slots nothing changes: the request is the same on both kinds of model
    (but the model name)."""
    head = PromptBuilder(system="Be brief.", tokenizer=None).freeze()
    conv = head.conversation()
    conv.user("hi")
    body = _render(conv.render(), SUPPORTED).body
    assert [m["role"] for m in body["messages"]] == ["user"]


def test_bad_tail_role() -> None:
    """An unknown role is refused by name."""
    with pytest.raises(InputError) as caught:
        _render(_conversation().render(tail={"now": "1"}), SUPPORTED, tail_role="developer")
    assert caught.value.code == "render-tail-role"
