"""The emulator's reasoning output and checks (``emulator/_reasoning.py``), through the
official SDKs: signed thinking blocks, Responses reasoning items, and the 400s a provider
gives when they come back altered or missing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from stableprompt.emulator import AssistantTurn, Emulator, FakeClock, ScriptedResponder, ToolCall

THINKING: Any = {"type": "enabled", "budget_tokens": 1024}
USER = {"role": "user", "content": "hi"}
TOOL: Any = {"name": "look", "description": "Look.", "input_schema": {"type": "object"}}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    turns = [AssistantTurn(text="Looking.", tool_calls=(ToolCall("look", {}),))]
    with Emulator(clock=FakeClock(), responder=ScriptedResponder(turns, cycle=True)) as e:
        yield e


def _ask(client: anthropic.Anthropic, messages: list[Any], **kw: Any) -> Any:
    return client.messages.create(model="claude-sonnet-4-6", max_tokens=2048, tools=[TOOL],
                                  messages=messages, **kw)


def test_thinking_blocks_are_signed_and_checked(emu: Emulator) -> None:
    """With thinking on, the answer starts with a signed thinking block; sending it back
    unchanged is accepted, an edited one or a tool turn without it is a 400."""
    with anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0) as client:
        plain = _ask(client, [{"role": "user", "content": "hi"}])
        assert [b.type for b in plain.content] == ["text", "tool_use"]
        first = _ask(client, [{"role": "user", "content": "hi"}], thinking=THINKING)
        assert [b.type for b in first.content] == ["thinking", "text", "tool_use"]
        turn = [b.model_dump(exclude_unset=True) for b in first.content]
        result = {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": first.content[2].id, "content": "ok"}]}

        def history(content: list[Any]) -> list[Any]:
            return [{"role": "user", "content": "hi"}, {"role": "assistant", "content": content},
                    result]

        assert _ask(client, history(turn), thinking=THINKING).content[0].type == "thinking"
        edited = [{**turn[0], "thinking": turn[0]["thinking"] + " "}, *turn[1:]]
        with pytest.raises(anthropic.BadRequestError, match="signature"):
            _ask(client, history(edited), thinking=THINKING)
        with pytest.raises(anthropic.BadRequestError, match="must start with a thinking"):
            _ask(client, history(turn[1:]), thinking=THINKING)
        _ask(client, history(turn[1:]))  # without thinking, no such rule


def test_streamed_thinking_matches_the_documented_events(emu: Emulator) -> None:
    """A streamed answer carries the thinking text in ``thinking_delta`` events and the
    signature in a ``signature_delta``, so the SDK rebuilds the same block."""
    with anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0) as client, \
            client.messages.stream(model="claude-sonnet-4-6", max_tokens=2048, thinking=THINKING,
                                   messages=[{"role": "user", "content": "hi"}]) as stream:
        message = stream.get_final_message()
    block = message.content[0]
    assert block.type == "thinking" and block.signature and block.thinking.startswith("Request")


def test_responses_reasoning_items_follow_the_request(emu: Emulator) -> None:
    """A reasoning effort adds a reasoning item first; ``summary`` and
    ``include=["reasoning.encrypted_content"]`` fill it; an altered encrypted content sent
    back is a 400."""
    with openai.OpenAI(base_url=emu.openai_base_url, api_key="k", max_retries=0) as client:
        plain = client.responses.create(model="gpt-5.2", input="hi")
        assert [i.type for i in plain.output] == ["message", "function_call"]
        bare = client.responses.create(model="gpt-5.2", input="hi", reasoning={"effort": "low"})
        item = bare.output[0]
        assert item.type == "reasoning" and item.summary == [] and item.encrypted_content is None
        full = client.responses.create(model="gpt-5.2", input="hi", store=False,
                                       reasoning={"effort": "low", "summary": "auto"},
                                       include=["reasoning.encrypted_content"])
        reasoning = full.output[0].model_dump(exclude_unset=True)
        assert reasoning["summary"] and reasoning["encrypted_content"].startswith("emu1.")
        client.responses.create(model="gpt-5.2", input=[USER, reasoning])  # type: ignore[list-item]
        forged = {**reasoning, "encrypted_content": reasoning["encrypted_content"][:-2] + "x="}
        with pytest.raises(openai.BadRequestError, match="could not be verified"):
            client.responses.create(model="gpt-5.2", input=[USER, forged])  # type: ignore[list-item]
