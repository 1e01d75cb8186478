"""Anthropic mid-conversation system messages and tool changes in the emulator: where they may
stand, what they may hold, and that the prefix before them stays cached."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from stableprompt._policy import INLINE_TOOLS_BETA, TOOL_CHANGES_BETA
from stableprompt.emulator import Emulator, FakeClock

LONG = " ".join(f"rule {i}: keep the prefix stable." for i in range(300))
MODEL = "claude-opus-5-5"
TOOLS_BETA = TOOL_CHANGES_BETA
TOOLS = [{"name": "Bash", "description": "run a command", "input_schema": {"type": "object"}},
         {"name": "Read", "description": "read a file", "input_schema": {"type": "object"}}]
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


def post(emu: Emulator, messages: list[Any], *, model: str = MODEL, betas: str = "",
         **extra: Any) -> httpx.Response:
    body = {"model": model, "max_tokens": 32, "tools": TOOLS,
            "system": [{"type": "text", "text": LONG}], "messages": messages, **extra}
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    if betas:
        headers["anthropic-beta"] = betas
    return httpx.post(emu.base_url + "/v1/messages", json=body, headers=headers, timeout=30)


def user(text: str, **marker: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marker:
        block["cache_control"] = marker
    return {"role": "user", "content": [block]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def system(*blocks: Any) -> dict[str, Any]:
    return {"role": "system", "content": list(blocks) or "Be brief from here on."}


def error_of(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


def test_sdk_sends_a_system_message_the_emulator_accepts(emu: Emulator) -> None:
    """The official SDK's ``role: "system"`` message after a user turn is answered 200."""
    with anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0) as client:
        message = client.messages.create(model=MODEL, max_tokens=32, messages=[
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "Answer in French."}])
    assert message.role == "assistant"


def test_appended_system_message_keeps_the_cached_prefix(emu: Emulator) -> None:
    """A system message appended after the cached user turn reads the whole prefix before it
    (it is one more block at the end)."""
    history = [user("question", **EPHEMERAL)]
    first = post(emu, history)
    written = first.json()["usage"]["cache_creation_input_tokens"]
    assert written > 2000
    second = post(emu, [*history, system()])
    assert second.status_code == 200, second.text
    assert second.json()["usage"]["cache_read_input_tokens"] == written


@pytest.mark.parametrize(("messages", "fragment"), [
    ([system(), user("q")], "cannot be the first message"),
    ([user("q"), system(), system()], "cannot directly follow another system message"),
    ([user("q"), assistant("a"), system()], "must follow a user turn"),
    ([user("q"), system(), user("again")], "must be the last message or be followed by an "
     "assistant turn"),
    ([user("q"), {"role": "system", "content": [{"type": "image", "source": {}}]}],
     "text only"),
    ([user("q"), {"role": "system", "content": ""}], "must be non-empty"),
    ([user("q"), {"role": "system", "content": "x", "name": "op"}],
     "Extra inputs are not permitted"),
    ([user("q"), {"role": "robot", "content": "x"}], "must be 'user', 'assistant' or 'system'"),
])
def test_misplaced_or_malformed_system_messages_are_400(
        emu: Emulator, messages: list[Any], fragment: str) -> None:
    """Each documented placement and content rule is a 400 naming the message."""
    assert fragment in error_of(post(emu, messages))


def test_system_message_may_precede_an_assistant_turn(emu: Emulator) -> None:
    """user, system, assistant, user: the system message is followed by an assistant turn."""
    response = post(emu, [user("q"), system(), assistant("a"), user("next")])
    assert response.status_code == 200, response.text


def test_system_message_may_follow_server_tool_use(emu: Emulator) -> None:
    """An assistant turn ending in server-tool use may be followed by a system message."""
    turn = {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
         "input": {"query": "x"}}]}
    assert post(emu, [user("q"), turn, system()]).status_code == 200


@pytest.mark.parametrize("model", ["claude-sonnet-5", "claude-sonnet-4-6", "claude-haiku-4-5"])
def test_unsupported_models_refuse_system_messages(emu: Emulator, model: str) -> None:
    """Models outside the documented list answer the documented 400."""
    assert error_of(post(emu, [user("q"), system()], model=model)) == (
        "role 'system' is not supported on this model")


@pytest.mark.parametrize("model", ["claude-fable-5-1", "claude-mythos-5", "claude-opus-4-8",
                                   "claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5"])
def test_supported_models_accept_system_messages(emu: Emulator, model: str) -> None:
    """Every documented model accepts them."""
    assert post(emu, [user("q"), system()], model=model).status_code == 200


def addition(name: str, kind: str = "tool_addition") -> dict[str, Any]:
    return {"type": kind, "tool": {"type": "tool_reference", "name": name}}


def test_tool_changes_need_the_beta_header(emu: Emulator) -> None:
    """``tool_addition`` blocks without the beta header are a 400 naming the header."""
    message = error_of(post(emu, [user("q"), system(addition("Bash"))]))
    assert TOOLS_BETA in message


def test_tool_changes_keep_tools_and_the_prefix(emu: Emulator) -> None:
    """With the beta, removing and re-adding tools mid-conversation leaves ``tools[]`` and the
    cached prefix intact: the next call reads everything before the system message."""
    history = [user("question", **EPHEMERAL)]
    written = post(emu, history, betas=TOOLS_BETA).json()["usage"][
        "cache_creation_input_tokens"]
    changed = [*history, system({"type": "text", "text": "Bash is gone for now."},
                                addition("Bash", "tool_removal"))]
    response = post(emu, changed, betas=TOOLS_BETA)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["cache_read_input_tokens"] == written
    back = [*changed, assistant("ok"), user("more"), system(addition("Bash"))]
    assert post(emu, back, betas=TOOLS_BETA).status_code == 200


@pytest.mark.parametrize(("tool", "fragment"), [
    ({"type": "tool_reference", "name": "Nope"}, "no tool named 'Nope'"),
    ({"type": "mcp_toolset_reference", "server_name": "gh"}, "no MCP server named 'gh'"),
    ({"type": "tool_definition", "definition": {"name": "Grep", "input_schema": {}}},
     "inline-tools-2026-09-15"),
    ({"type": "wat"}, "must be one of"),
])
def test_tool_change_references_are_checked(emu: Emulator, tool: Any, fragment: str) -> None:
    """References must name a declared tool or MCP server; inline definitions need their
    own beta."""
    messages = [user("q"), system({"type": "tool_addition", "tool": tool})]
    assert fragment in error_of(post(emu, messages, betas=TOOLS_BETA))


def test_inline_definition_can_be_referenced_later(emu: Emulator) -> None:
    """With the inline-tools beta a ``tool_definition`` adds a tool a later block may name."""
    betas = f"{TOOLS_BETA},{INLINE_TOOLS_BETA}"
    define = {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": {
        "name": "Grep", "input_schema": {"type": "object"}}}}
    messages = [user("q"), system(define), assistant("a"), user("q2"),
                system(addition("Grep", "tool_removal"))]
    assert post(emu, messages, betas=betas).status_code == 200
