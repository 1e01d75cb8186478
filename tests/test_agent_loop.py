"""Issue 14 acceptance: a 5-turn tool-calling loop on the official ``anthropic`` and ``openai``
SDKs (Chat Completions and Responses) against the emulator, written with ``add_response`` and
the public API only, with thinking / reasoning items in the responses; every request after
the first is a byte-prefix-compatible extension of its predecessor (lint: 0 breaks)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from stableprompt import PromptBuilder, ProviderRequest, diff, lint_requests
from stableprompt.emulator import AssistantTurn, Emulator, FakeClock, ScriptedResponder, ToolCall
from stableprompt.providers import parse_response

TURNS = 5
RULES = " ".join(f"Rule {i}: quote invoice totals exactly as the tool returns them."
                 for i in range(250))  # well above every model's minimum cacheable prefix
INVOICE_TOOL = {
    "name": "get_invoice", "description": "Fetch one invoice by id.",
    "input_schema": {"type": "object", "properties": {"id": {"type": "string"}},
                     "required": ["id"]}}
SCRIPT = [AssistantTurn(text=f"Fetching invoice {i}.",
                        tool_calls=(ToolCall("get_invoice", {"id": str(i)}),))
          for i in range(TURNS)] + [AssistantTurn(text="All five invoices are paid.")]

Sender = Callable[[ProviderRequest], Any]


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock(), responder=ScriptedResponder(SCRIPT)) as emulator:
        yield emulator


def _captured() -> tuple[httpx2.Client, list[bytes]]:
    """An httpx2 client for the SDKs that keeps every request body as sent."""
    bodies: list[bytes] = []

    def keep(request: httpx2.Request) -> None:
        bodies.append(request.read())

    return httpx2.Client(event_hooks={"request": [keep]}), bodies


def _sender(fmt: str, emu: Emulator, http: httpx2.Client) -> tuple[Sender, Callable[[Any], Any]]:
    """``(send, render)``: send a rendered request with the official SDK (its body as the
    keyword arguments), and render a prompt to ``fmt`` with reasoning turned on."""
    if fmt == "anthropic":
        client = anthropic.Anthropic(base_url=emu.base_url, api_key="emulator", http_client=http,
                                     max_retries=0)
        return (lambda r: client.messages.create(**r.body),
                lambda p: p.to_anthropic(model="claude-sonnet-4-6", max_tokens=2048,
                                         thinking={"type": "enabled", "budget_tokens": 1024}))
    oai = openai.OpenAI(base_url=emu.openai_base_url, api_key="emulator", http_client=http,
                        max_retries=0)
    if fmt == "openai-chat":
        return (lambda r: oai.chat.completions.create(**r.body),
                lambda p: p.to_openai_chat(model="gpt-5.2", prompt_cache_key=True))
    return (lambda r: oai.responses.create(**r.body),
            lambda p: p.to_openai_responses(
                model="gpt-5.2", prompt_cache_key=True, store=False,
                reasoning={"effort": "low", "summary": "auto"},
                include=["reasoning.encrypted_content"]))


@pytest.mark.parametrize("fmt", ["anthropic", "openai-chat", "openai-responses"])
def test_a_five_turn_tool_loop_on_the_official_sdks_only_appends(emu: Emulator,
                                                                 fmt: str) -> None:
    """Responses go into history with ``add_response`` (thinking and reasoning kept), tool
    results with ``tool_result``; each request extends the previous one byte for byte, the
    emulator accepts the replayed signatures / encrypted contents, and lint finds 0 breaks."""
    head = PromptBuilder(system=["You are a billing agent.", RULES], tools=[INVOICE_TOOL],
                         tail_slots=["turn"]).freeze()
    conv = head.conversation()
    conv.user("Are invoices 0 to 4 paid?")
    http, bodies = _captured()
    send, render = _sender(fmt, emu, http)
    requests: list[ProviderRequest] = []
    reasoning_seen = 0
    usages: list[Any] = []
    with http:
        for turn in range(TURNS + 1):
            request = render(conv.render(tail={"turn": f"turn {turn}"}))
            requests.append(request)
            response = send(request)
            usages.append(parse_response(fmt, response.model_dump(mode="json")))
            message = conv.add_response(response)
            reasoning_seen += sum(block["type"] == "reasoning"
                                  for block in message.to_dict()["content"])
            for call in message.tool_calls:
                conv.tool_result(call.id, {"id": call.arguments["id"], "paid": True})
    assert not conv.open_tool_calls and len(conv.messages) == 2 * TURNS + 2
    assert conv.messages[-1].text == "All five invoices are paid."
    if fmt != "openai-chat":  # Chat Completions returns no reasoning items
        assert reasoning_seen == TURNS + 1
    for before, after in itertools.pairwise(requests):
        assert diff(before, after) is None
    sent = [json.loads(body) for body in bodies]
    assert len(sent) == TURNS + 1
    if fmt == "anthropic":  # every thinking block went back, signature and all, in place
        last = [m for m in sent[-1]["messages"] if m["role"] == "assistant"]
        assert [m["content"][0]["type"] for m in last] == ["thinking"] * TURNS
    elif fmt == "openai-responses":
        kinds = [item.get("type") for item in sent[-1]["input"]]
        assert kinds.count("reasoning") == TURNS
        assert all(kinds[i + 1] == "message" for i, k in enumerate(kinds) if k == "reasoning")
    # Append-only pays: every later call reads what the one before it wrote.
    assert usages[0].cache_read_tokens == 0
    assert all(u.cache_read_tokens for u in usages[1:])
    report = lint_requests(sent, wire_format=fmt)
    assert report.breaks == ()
    assert [p.predecessor for p in report.pairs][1:] == list(range(TURNS))
    assert emu.stats().requests == TURNS + 1
