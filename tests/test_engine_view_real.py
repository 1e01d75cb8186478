"""Exact predictions against the real llama-server (``real_engine``): the recorder asks the
engine for its token view; the official SDKs send through a RecordingTransport, on all three
endpoints. Every prediction must equal the engine's reported cached tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from stableprompt import Recorder, RecordingTransport
from stableprompt.testing import llama_server

pytestmark = pytest.mark.real_engine

SYSTEM = "You are a careful assistant for a billing system. Answer briefly. " * 12
TOOL: dict[str, Any] = {"name": "get_invoice", "description": "Fetch an invoice by id.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                       "required": ["id"]}}


@pytest.fixture
def llama_url(llama_source: Path) -> Iterator[str]:
    """A fresh server per test (about 0.3 s): the recorder knows what the slot holds only from
    the calls it recorded, so no other test may have filled it."""
    with llama_server() as server:
        yield server.base_url


@pytest.fixture
def recorder(llama_url: str) -> Iterator[Recorder]:
    """A recorder asking the engine for its token view."""
    with Recorder(tokenizer="bytes/4", provider="llama-cpp", engine=llama_url) as recorder:
        yield recorder
    exact = [r for r in recorder.records if not r.verdict_detail.get("replayed_reply_tokens")]
    assert all(r.predicted_cache_read_tokens == r.cache_read_tokens for r in exact), [
        (r.verdict, r.predicted_cache_read_tokens, r.cache_read_tokens, r.input_tokens_total,
         r.output_tokens) for r in recorder.records]


@pytest.fixture(params=[False, True], ids=["inline", "in-thread"])
def http(recorder: Recorder, request: pytest.FixtureRequest) -> Iterator[httpx2.Client]:
    """The SDKs' HTTP client, recording inline or on the recorder's thread
    (``record_in_thread``: the same records, the engine's view included)."""
    with httpx2.Client(transport=RecordingTransport(
            httpx2.HTTPTransport(), recorder=recorder,
            record_in_thread=request.param)) as client:
        yield client


def _check(recorder: Recorder, verdicts: list[str]) -> None:
    assert recorder.flush(60)  # in thread: every call stored
    got = [r.verdict for r in recorder.records]
    assert got == verdicts, [(r.verdict, r.verdict_detail) for r in recorder.records]
    for record in recorder.records:
        assert record.verdict_detail["token_view"] == "engine"
        assert record.input_tokens_total is not None and record.cache_write_tokens in (0, None)


def test_chat_tool_loop_replay_and_a_clock_in_the_system_prompt(
        recorder: Recorder, http: httpx2.Client, llama_url: str) -> None:
    sdk = openai.OpenAI(api_key="unused", base_url=llama_url + "/v1",
                        http_client=http, max_retries=0)
    tools: Any = [{"type": "function", "function": TOOL}]
    messages: list[Any] = [{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": "Show invoice 7."}]
    for step in range(3):
        reply = sdk.chat.completions.create(model="tiny", messages=messages, tools=tools,
                                            max_tokens=3)
        if step == 1:  # the model's own reply, replayed verbatim: its tokens are in the slot
            messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                         {"role": "user", "content": "And invoice 8?"}]
        else:
            call = {"id": f"c{step}", "type": "function",
                    "function": {"name": "get_invoice", "arguments": json.dumps({"id": "7"})}}
            messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": f"c{step}", "content": '{"total": 1}'}]
    messages[0] = {"role": "system", "content": "Current time: 10:01. " + SYSTEM}
    sdk.chat.completions.create(model="tiny", messages=messages, tools=tools, max_tokens=3)
    _check(recorder, ["cold", "hit", "hit", "client_mutation"])
    # The replayed reply: the slot holds the model's *sampled* ids, the prediction assumes the
    # canonical tokenization of its text (what a trained model emits; a random-weight model
    # may not): the two differ by at most the reply's evaluated tokens.
    replay = recorder.records[2]
    previous = recorder.records[1]
    assert previous.input_tokens_total is not None and previous.output_tokens is not None
    assert replay.predicted_cache_read_tokens is not None
    assert replay.cache_read_tokens is not None
    low = previous.input_tokens_total
    high = low + previous.output_tokens - 1
    assert low <= replay.cache_read_tokens <= high
    assert low <= replay.predicted_cache_read_tokens <= high
    divergence: dict[str, Any] = recorder.records[-1].verdict_detail[
        "engine_divergence"]  # type: ignore[assignment]
    assert "Current" in divergence["sent"] and "You are" in divergence["previous"]


def test_messages_endpoint_with_the_anthropic_sdk(
        recorder: Recorder, http: httpx2.Client, llama_url: str) -> None:
    sdk = anthropic.Anthropic(api_key="unused", base_url=llama_url, http_client=http,
                              max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Hello there."}]
    for turn in range(3):
        sdk.messages.create(model="tiny", max_tokens=3, system=SYSTEM, messages=messages,
                            tools=[{"name": TOOL["name"], "description": TOOL["description"],
                                    "input_schema": TOOL["parameters"]}])
        messages += [{"role": "assistant", "content": [{"type": "text", "text": f"ok {turn}"}]},
                     {"role": "user", "content": f"More, part {turn}."}]
    _check(recorder, ["cold", "hit", "hit"])
    assert all("cache_write_assumed_zero" in r.verdict_detail for r in recorder.records)


def test_responses_endpoint_with_the_openai_sdk(
        recorder: Recorder, http: httpx2.Client, llama_url: str) -> None:
    sdk = openai.OpenAI(api_key="unused", base_url=llama_url + "/v1",
                        http_client=http, max_retries=0)
    items: list[Any] = [{"type": "message", "role": "user", "content": "Hello there."}]
    for turn in range(3):
        sdk.responses.create(model="tiny", instructions=SYSTEM, input=items,
                             max_output_tokens=3,
                             tools=[{"type": "function", **TOOL}])  # type: ignore[list-item]
        items += [{"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": f"ok {turn}"}]},
                  {"type": "message", "role": "user", "content": f"More, part {turn}."}]
    _check(recorder, ["cold", "hit", "hit"])
