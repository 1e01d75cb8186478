"""Tool changes without a new head (issue 25, item 2): ``Conversation.enable_tools`` /
``disable_tools`` append the change to history as Anthropic ``tool_addition`` /
``tool_removal`` blocks (beta header), send OpenAI ``tool_choice: allowed_tools``, or fall
back to the tail mask; the head fingerprint never changes."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest

from stableprompt import (
    Conversation,
    HistoryError,
    InputError,
    PromptBuilder,
    ProviderRequest,
    Recorder,
    Tool,
    ToolError,
    diff,
)
from stableprompt._client import DIAGNOSTICS_BETA, AnthropicClient
from stableprompt._client._clients import merge_headers
from stableprompt._policy import TOOL_CHANGES_BETA, model_features
from test_transport import API_KEY, FakeProvider

TOOLS = [Tool(n, f"Tool {n}.", {"type": "object", "properties": {"q": {"type": "string"}}})
         for n in ("alpha", "beta", "gamma")]
SUPPORTED, UNSUPPORTED = "claude-opus-5", "claude-sonnet-5"
ANSWER = {"id": "msg_1", "type": "message", "role": "assistant", "model": SUPPORTED,
          "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
          "usage": {"input_tokens": 1, "output_tokens": 1}}


def _conversation() -> Conversation:
    head = PromptBuilder(system="Be brief.", tools=TOOLS, tail_slots={"now": False},
                         tokenizer=None).freeze()
    conv = head.conversation()
    conv.user("hi")
    return conv


def _anthropic(conv: Conversation, model: str = SUPPORTED, **kw: Any) -> ProviderRequest:
    return conv.render(**kw).to_anthropic(model=model, max_tokens=64)


def _roles(request: ProviderRequest) -> list[str]:
    return [m["role"] for m in request.body["messages"]]


def test_supported_model_gets_tool_change_blocks_and_the_beta_header() -> None:
    """On a model with tool changes the change is a ``role: system`` message of
    ``tool_removal`` blocks after the user turn, with the beta header; the head (tools
    included) is unchanged, and the earlier request stays a prefix of the later one."""
    conv = _conversation()
    before = _anthropic(conv)
    conv.disable_tools(["beta"])
    after = _anthropic(conv)
    assert _roles(after) == ["user", "system"]
    assert after.body["messages"][1]["content"] == [{
        "cache_control": {"type": "ephemeral"},
        "tool": {"name": "beta", "type": "tool_reference"}, "type": "tool_removal"}]
    assert after.headers == {"anthropic-beta": TOOL_CHANGES_BETA}
    assert before.headers == {}
    assert after.head_fingerprint == before.head_fingerprint
    assert after.body["tools"] == before.body["tools"]
    assert diff(before, after) is None
    assert conv.enabled_tools == ("alpha", "gamma")


def test_enabling_again_appends_a_tool_addition_and_history_grows_only() -> None:
    """Re-enabling appends ``tool_addition`` after the next user turn; the history before
    it keeps its bytes."""
    conv = _conversation()
    conv.disable_tools(["beta", "gamma"])
    first = _anthropic(conv)
    conv.add_response(ANSWER)
    conv.user("more")
    conv.enable_tools(["gamma"])
    second = _anthropic(conv)
    assert _roles(second) == ["user", "system", "assistant", "user", "system"]
    assert [b["type"] for b in second.body["messages"][1]["content"]] == ["tool_removal"] * 2
    assert second.body["messages"][4]["content"][0]["type"] == "tool_addition"
    assert diff(first, second) is None
    assert conv.enabled_tools == ("alpha", "gamma")


def test_a_change_after_an_assistant_turn_waits_for_the_next_user_turn() -> None:
    """A system message must follow a user turn: a change made after the assistant's answer
    is pending (stated by the tail mask meanwhile) and goes into history after the next user
    message."""
    conv = _conversation()
    conv.add_response(ANSWER)
    conv.disable_tools(["alpha"])
    waiting = _anthropic(conv, tail={"now": "1"})
    assert _roles(waiting) == ["user", "assistant", "user"]
    assert "Only these tools may be used this turn: beta, gamma." in json.dumps(
        waiting.body["messages"][-1])
    assert waiting.headers == {}
    conv.user("next")
    placed = _anthropic(conv, tail={"now": "2"})
    assert _roles(placed) == ["user", "assistant", "user", "system"]
    # the tail joins the tool-change message (never a system message after a system one)
    assert [b["type"] for b in placed.body["messages"][-1]["content"]] == [
        "tool_removal", "text"]


def test_a_model_without_tool_changes_gets_the_tail_mask() -> None:
    """Sonnet 5 (no mid-conversation system messages): no system message, the tail names the
    enabled tools, the history is the same bytes as before the change."""
    assert model_features("anthropic", UNSUPPORTED).tool_changes_beta is None
    conv = _conversation()
    before = _anthropic(conv, UNSUPPORTED)
    conv.disable_tools(["beta"])
    after = _anthropic(conv, UNSUPPORTED)
    assert _roles(after) == ["user"] and after.headers == {}
    assert after.body["messages"][0]["content"][-1]["text"] == (
        "<allowed_tools>\nOnly these tools may be used this turn: alpha, gamma.\n"
        "</allowed_tools>")
    assert diff(before, after) is None
    assert after.fingerprint == after.segmented.fingerprint
    # later turns render the history without the change message, incrementally
    conv.add_response(ANSWER)
    conv.user("more")
    later = _anthropic(conv, UNSUPPORTED)
    assert _roles(later) == ["user", "assistant", "user"]
    assert later.fingerprint == later.segmented.fingerprint


@pytest.mark.parametrize("method", ["to_openai_chat", "to_openai_responses"])
def test_openai_gets_allowed_tools_and_an_unchanged_history(method: str) -> None:
    """OpenAI (GPT-5 and later): ``tool_choice: allowed_tools`` names the enabled tools;
    tools and history are unchanged. An earlier model gets the tail mask instead."""
    conv = _conversation()
    before = getattr(conv.render(), method)(model="gpt-5.6")
    conv.disable_tools(["beta"])
    rendered = conv.render()
    after = getattr(rendered, method)(model="gpt-5.6")
    choice = after.body["tool_choice"]
    assert choice["type"] == "allowed_tools"
    names = [t.get("name") or t["function"]["name"]
             for t in (choice.get("allowed_tools") or choice)["tools"]]
    assert names == ["alpha", "gamma"]
    assert after.body["tools"] == before.body["tools"]
    # Only tool_choice differs, and it is not part of OpenAI's cache key (the guide does not
    # list it among the settings that change the prefix; the emulator agrees): the cached
    # prefix is the same, so there is no divergence and the fingerprint is unchanged.
    assert diff(before, after) is None
    assert after.fingerprint == before.fingerprint
    assert after.fingerprint == after.segmented.fingerprint
    old = getattr(rendered, method)(model="gpt-4.1")
    assert "tool_choice" not in old.body
    assert b"Only these tools may be used this turn: alpha, gamma." in old.content
    required = getattr(rendered, method)(model="gpt-5.6", tool_choice="required")
    assert "required" in json.dumps(required.body["tool_choice"])
    with pytest.raises(InputError):
        getattr(rendered, method)(model="gpt-5.6", tool_choice={"type": "function"})


def test_names_must_be_in_the_frozen_head() -> None:
    """An unknown tool (a new tool needs a new head) or a bare string is refused."""
    conv = _conversation()
    with pytest.raises(ToolError) as caught:
        conv.enable_tools(["delta"])
    assert caught.value.code == "tool-unknown" and "delta" in str(caught.value)
    with pytest.raises(ToolError):
        conv.disable_tools("alpha")


def test_a_user_message_cannot_follow_a_tool_change() -> None:
    """A mid-conversation system message must be last or followed by an assistant turn."""
    conv = _conversation()
    conv.disable_tools(["alpha"])
    conv.render()
    with pytest.raises(HistoryError) as caught:
        conv.user("again")
    assert caught.value.code == "history-system-placement"


def test_a_forced_user_tail_after_a_tool_change_is_refused() -> None:
    """The tail cannot be a user message after a tool change (the system message would no
    longer be last)."""
    conv = _conversation()
    conv.disable_tools(["alpha"])
    with pytest.raises(InputError) as caught:
        conv.render(tail={"now": "1"}).to_anthropic(model=SUPPORTED, max_tokens=8,
                                                     tail_role="user")
    assert caught.value.code == "render-tail-role"


def test_export_resume_and_fork_keep_the_changes() -> None:
    """The tool-change messages are history: exported, resumed and forked byte for byte."""
    conv = _conversation()
    conv.disable_tools(["alpha"])
    request = _anthropic(conv)
    resumed = conv.head.resume(conv.export())
    assert resumed.enabled_tools == ("beta", "gamma")
    assert _anthropic(resumed).content == request.content
    assert _anthropic(conv.fork()).content == request.content


def test_compaction_of_a_change_makes_it_pending_again() -> None:
    """Compacting a span with a tool change loses the message, not the state: the change is
    written again after the next user turn."""
    conv = _conversation()
    conv.disable_tools(["alpha"])
    conv.render()
    conv.add_response(ANSWER)
    conv.user("more")
    conv.compact("summary", start=0, end=3)
    assert conv.enabled_tools == ("beta", "gamma")
    request = _anthropic(conv)
    assert _roles(request) == ["user", "system"]


def test_clients_send_the_request_headers_merged_with_their_own() -> None:
    """The client sends ``ProviderRequest.headers``; ``anthropic-beta`` values from the
    request and from diagnostics are merged, sorted, each once."""
    assert merge_headers({"anthropic-beta": TOOL_CHANGES_BETA},
                         {"anthropic-beta": DIAGNOSTICS_BETA}) == {
        "anthropic-beta": ",".join(sorted([TOOL_CHANGES_BETA, DIAGNOSTICS_BETA]))}
    fake = FakeProvider(httpx)
    client = AnthropicClient(API_KEY, base_url="http://provider.test",
                             recorder=Recorder(tokenizer="bytes/4"),
                             transport=httpx.MockTransport(fake), diagnostics=True)
    conv = _conversation()
    conv.disable_tools(["alpha"])
    client.send(_anthropic(conv))
    assert fake.requests[0].headers["anthropic-beta"] == ",".join(
        sorted([TOOL_CHANGES_BETA, DIAGNOSTICS_BETA]))


def test_every_turn_with_tool_changes_equals_a_from_scratch_render() -> None:
    """With tool changes every few turns, each format's incremental render equals a
    from-scratch one and its fingerprint the segmented body's (test_incremental_render's
    check, all its renders, Anthropic with and without tool changes)."""
    from test_incremental_render import RENDERS, check

    renders = {**RENDERS, "opus": lambda r: r.to_anthropic(model=SUPPORTED, max_tokens=5),
               "sonnet": lambda r: r.to_anthropic(model=UNSUPPORTED, max_tokens=5)}
    conv = _conversation()
    for i in range(24):
        if i % 3 == 0:
            (conv.disable_tools if i % 2 else conv.enable_tools)([TOOLS[i % 3].name])
        if i % 4 == 1:
            conv.system(f"Operator update {i}.")
        rendered = conv.render(tail={"now": str(i)} if i % 2 else None)
        for render in renders.values():
            check(rendered, render)
        conv.add_response(ANSWER)
        conv.user(f"question {i}")


def test_the_emulator_caches_across_tool_changes_and_system_tails() -> None:
    """Against the emulator (Opus 5): the tool-change message and the system-message tail
    are accepted and every later turn reads the previous request's whole stable prefix; a
    model without system messages answers 400, as the API does."""
    from stableprompt.emulator import Emulator, FakeClock

    head = PromptBuilder(system=" ".join(f"rule {i}: keep the prefix." for i in range(200)),
                         tools=TOOLS, tail_slots=["now"], tokenizer=None).freeze()
    conv = head.conversation()
    reads = []
    headers = {"x-api-key": "k", "content-type": "application/json"}
    with Emulator(clock=FakeClock()) as emu, httpx.Client(base_url=emu.base_url,
                                                           headers=headers) as http:
        for turn in range(6):
            conv.user(f"question {turn}")
            if turn % 2:
                (conv.disable_tools if turn % 4 == 1 else conv.enable_tools)(["beta"])
            request = conv.render(tail={"now": str(turn)}).to_anthropic(
                model=SUPPORTED, max_tokens=64)
            answer = http.post("/v1/messages", content=request.content,
                               headers=dict(request.headers)).json()
            reads.append((answer["usage"]["cache_read_input_tokens"],
                          answer["usage"]["cache_creation_input_tokens"]))
            conv.add_response(answer)
        conv.user("last")
        refused = http.post("/v1/messages", content=conv.render(tail={"now": "y"}).to_anthropic(
            model=UNSUPPORTED, max_tokens=8, tail_role="system").content)
    assert refused.status_code == 400
    assert "not supported on this model" in refused.text
    for (read, write), (next_read, _) in itertools.pairwise(reads):
        assert next_read == read + write  # everything the previous turn wrote is read


def test_system_appends_instructions_to_history_in_each_form() -> None:
    """``Conversation.system``: a ``role: system`` text message after the user turn (Opus 5),
    ``<system-reminder>`` user text in the same place (Sonnet 5), a developer message
    (OpenAI); the head never changes and the history before it keeps its bytes."""
    conv = _conversation()
    before = _anthropic(conv)
    conv.system("Answer in French.")
    rendered = conv.render()
    opus = rendered.to_anthropic(model=SUPPORTED, max_tokens=8)
    assert opus.body["messages"][1] == {"content": [{
        "cache_control": {"type": "ephemeral"}, "text": "Answer in French.", "type": "text"}],
        "role": "system"}
    assert opus.headers == {} and diff(before, opus) is None
    sonnet = rendered.to_anthropic(model=UNSUPPORTED, max_tokens=8)
    assert _roles(sonnet) == ["user"]
    assert sonnet.body["messages"][0]["content"][-1]["text"] == (
        "<system-reminder>\nAnswer in French.\n</system-reminder>")
    chat = rendered.to_openai_chat(model="gpt-5.6")
    assert chat.body["messages"][-1] == {"content": "Answer in French.", "role": "developer"}
    assert opus.head_fingerprint == before.head_fingerprint
    for request in (opus, sonnet, chat, rendered.to_openai_responses(model="gpt-5.6")):
        assert request.fingerprint == request.segmented.fingerprint


def test_system_waits_for_a_user_turn_and_is_exported() -> None:
    """Instructions given after the assistant's answer go in after the next user message;
    they are history: exported and resumed byte for byte."""
    conv = _conversation()
    conv.add_response(ANSWER)
    conv.system("Be terse.")
    assert _roles(_anthropic(conv)) == ["user", "assistant"]
    conv.user("next")
    request = _anthropic(conv)
    assert _roles(request) == ["user", "assistant", "user", "system"]
    assert _anthropic(conv.head.resume(conv.export())).content == request.content
    with pytest.raises(HistoryError) as caught:
        conv.system("")
    assert caught.value.code == "history-empty-text"
