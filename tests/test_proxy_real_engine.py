"""The official ``openai`` and ``anthropic`` SDKs through ``stableprompt proxy`` to the real
llama-server (``real_engine``): the same answers as direct calls, and ledger rows that carry
what the engine reported.

Cache state is part of the input: llama-server reuses the KV cache of its slot's previous
prompt (ENGINES.md), and a prompt evaluated partly from cache need not give bit-identical
logits. So each comparison runs the same two-turn conversation twice from the same state:
the slot erased (``POST /slots/0?action=erase``), turn 1 (cold), turn 2 (extends turn 1 and
its reply: reads it from cache), once straight to the engine and once through the proxy.
Sampling is deterministic: greedy (``temperature`` 0), and on Chat Completions also seeded
sampling (``temperature`` 1, ``seed`` 7), which gives varied text, so equal answers mean more
than equal newlines of a random-weight model. ``/v1/messages`` has no seeded case: llama-server
converts a Messages body to chat passing on only ``temperature``, ``top_p``, ``top_k``,
``stream`` and ``chat_template_kwargs`` (``server_chat_convert_anthropic_to_oai`` in
``tools/server/server-chat.cpp`` of the vendored llama.cpp), so a ``seed`` is dropped and
sampling above 0 is random there. Answers are compared without what differs on every call by
design (ids, ``created``, timings in milliseconds)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from stableprompt import Ledger, Recorder, UsageRecord
from stableprompt._engine._server import LlamaServer
from stableprompt._proxy._server import Proxy

pytestmark = pytest.mark.real_engine

KEY = "sk-realengine-proxytest-0123456789abcdef"
SAMPLING = {"greedy": {"temperature": 0.0}, "seeded": {"temperature": 1.0, "seed": 7}}
MODES = ["sync", "async", "stream", "async-stream"]
Answer = dict[str, Any]


def _system(api: str, mode: str, sampling: str) -> str:
    """A system prompt of its own per test: each conversation is its own lineage, so its
    first turn is ``cold`` for the recorder as for the erased slot."""
    return f"Be brief ({api}, {mode}, {sampling}). " + "Answer in one short line. " * 12


def _erase(server: LlamaServer) -> None:
    response = httpx.post(f"{server.base_url}/slots/0?action=erase", timeout=30.0,
                          trust_env=False)
    assert response.status_code == 200, response.text


# --------------------------------------------------------------------------- openai


def _chat_answer(body: dict[str, Any]) -> Answer:
    choice = body["choices"][0]
    return {"content": choice["message"]["content"], "finish_reason": choice["finish_reason"],
            "usage": body["usage"], "timings": _counts(body["timings"])}


def _counts(timings: dict[str, Any]) -> dict[str, Any]:
    """The token counts of llama-server's ``timings`` (its milliseconds vary by design)."""
    return {k: v for k, v in timings.items() if k.endswith("_n")}


def _chat_stream_answer(chunks: list[dict[str, Any]]) -> Answer:
    content = "".join(c["choices"][0]["delta"].get("content") or ""
                      for c in chunks if c["choices"])
    reasons = [c["choices"][0]["finish_reason"] for c in chunks
               if c["choices"] and c["choices"][0]["finish_reason"]]
    (usage,) = [c["usage"] for c in chunks if c.get("usage")]
    timings = [c["timings"] for c in chunks if c.get("timings")]
    return {"content": content, "finish_reason": reasons[-1], "usage": usage,
            "timings": _counts(timings[-1])}


def _openai_turns(base_url: str, mode: str, params: dict[str, Any], system: str
                  ) -> list[Answer]:
    """Two turns of one conversation with the ``openai`` SDK in ``mode``."""
    def messages(previous: list[Answer]) -> Any:  # the SDKs' message param types
        out: list[dict[str, Any]] = [{"role": "system", "content": system},
                                     {"role": "user", "content": "Weather in Paris?"}]
        if previous:
            out += [{"role": "assistant", "content": previous[0]["content"]},
                    {"role": "user", "content": "And in Rome?"}]
        return out

    common: dict[str, Any] = {"model": "tiny", "max_tokens": 8, **params}
    stream: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
    answers: list[Answer] = []
    if mode in ("sync", "stream"):
        with openai.OpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=0) as client:
            for _ in range(2):
                if mode == "sync":
                    made = client.chat.completions.create(messages=messages(answers), **common)
                    answers.append(_chat_answer(made.model_dump()))
                else:
                    chunks = client.chat.completions.create(messages=messages(answers),
                                                            **common, **stream)
                    answers.append(_chat_stream_answer([c.model_dump() for c in chunks]))
        return answers

    async def run() -> None:
        async with openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=KEY,
                                      max_retries=0) as client:
            for _ in range(2):
                if mode == "async":
                    made = await client.chat.completions.create(messages=messages(answers),
                                                                **common)
                    answers.append(_chat_answer(made.model_dump()))
                else:
                    chunks = await client.chat.completions.create(
                        messages=messages(answers), **common, **stream)
                    answers.append(_chat_stream_answer([c.model_dump() async for c in chunks]))

    asyncio.run(run())
    return answers


# --------------------------------------------------------------------------- anthropic


def _message_answer(message: Any) -> Answer:
    dumped = message.model_dump()
    return {"content": [b.get("text") for b in dumped["content"]],
            "stop_reason": dumped["stop_reason"], "usage": dumped["usage"]}


def _anthropic_turns(base_url: str, mode: str, params: dict[str, Any], system: str
                     ) -> list[Answer]:
    """Two turns of one conversation with the ``anthropic`` SDK on ``/v1/messages``."""
    def messages(previous: list[Answer]) -> Any:  # the SDKs' message param types
        out: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]
        if previous:
            out += [{"role": "assistant", "content": "".join(previous[0]["content"])},
                    {"role": "user", "content": "And in Rome?"}]
        return out

    common: dict[str, Any] = {"model": "tiny", "max_tokens": 8, "system": system,
                              "extra_body": params}
    answers: list[Answer] = []
    if mode in ("sync", "stream"):
        with anthropic.Anthropic(base_url=base_url, api_key=KEY, max_retries=0) as client:
            for _ in range(2):
                if mode == "sync":
                    made = client.messages.create(messages=messages(answers), **common)
                else:
                    with client.messages.stream(messages=messages(answers), **common) as s:
                        made = s.get_final_message()
                answers.append(_message_answer(made))
        return answers

    async def run() -> None:
        async with anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY,
                                            max_retries=0) as client:
            for _ in range(2):
                if mode == "async":
                    made = await client.messages.create(messages=messages(answers), **common)
                else:
                    async with client.messages.stream(messages=messages(answers),
                                                      **common) as s:
                        made = await s.get_final_message()
                answers.append(_message_answer(made))

    asyncio.run(run())
    return answers


# --------------------------------------------------------------------------- the tests


@pytest.fixture
def proxied(llama_engine: LlamaServer, tmp_path: Path) -> Iterator[tuple[Proxy, Ledger]]:
    """The proxy as ``stableprompt proxy --provider llama-cpp`` runs it (worker-thread
    recording, pending journal) in front of the session's llama-server."""
    with Ledger(tmp_path / "calls.db") as ledger, \
            Proxy(llama_engine.base_url, recorder=Recorder(ledger, provider="llama-cpp"),
                  provider="llama-cpp", record_in_thread=True) as proxy:
        yield proxy, ledger


def _compare(server: LlamaServer, proxy: Proxy, ledger: Ledger,
             turns: Callable[[str], list[Answer]]) -> tuple[list[Answer], list[UsageRecord]]:
    """The conversation from an erased slot, direct then proxied; equal answers; the rows."""
    _erase(server)
    direct = turns(server.base_url)
    _erase(server)
    through = turns(proxy.base_url)
    assert through == direct
    proxy.app.drain()
    rows = ledger.records()
    assert len(rows) == 2
    return through, rows


@pytest.mark.parametrize("sampling", list(SAMPLING))
@pytest.mark.parametrize("mode", MODES)
def test_openai_sdk_through_the_proxy_answers_as_direct(
        llama_engine: LlamaServer, proxied: tuple[Proxy, Ledger], mode: str,
        sampling: str) -> None:
    """Chat Completions (sync, async, streaming, async streaming): the proxied answers equal
    the direct ones; each row has the engine's prompt, cached and completion tokens (its
    ``cached_tokens``, which equals ``timings.cache_n``), cold then hit."""
    proxy, ledger = proxied
    system = _system("openai", mode, sampling)
    answers, rows = _compare(llama_engine, proxy, ledger, lambda base: _openai_turns(
        base, mode, SAMPLING[sampling], system))
    assert answers[1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    for answer, row in zip(answers, rows, strict=True):
        usage, timings = answer["usage"], answer["timings"]
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        assert cached == timings["cache_n"]
        assert row.wire_format == "llama-cpp" and row.provider == "llama-cpp"
        assert (row.input_tokens_total, row.cache_read_tokens, row.output_tokens) == (
            usage["prompt_tokens"], cached, usage["completion_tokens"])
        assert row.status_code == 200 and row.error_class is None
    assert [r.verdict for r in rows] == ["cold", "hit"]
    assert rows[1].predecessor_id == rows[0].record_id
    if mode.endswith("stream"):
        assert all(r.ttft_ms is not None for r in rows)
    assert all(KEY not in r.to_json().decode() for r in rows)


@pytest.mark.parametrize("mode", MODES)
def test_anthropic_sdk_through_the_proxy_answers_as_direct(
        llama_engine: LlamaServer, proxied: tuple[Proxy, Ledger], mode: str) -> None:
    """Messages on llama-server's ``/v1/messages`` (sync, async, streaming, async
    streaming): the proxied answers equal the direct ones; each row has the engine's
    ``cache_read_input_tokens`` and its inclusive input total, no cache write (llama-server's
    cache is automatic), cold then hit."""
    proxy, ledger = proxied
    system = _system("anthropic", mode, "greedy")
    answers, rows = _compare(llama_engine, proxy, ledger, lambda base: _anthropic_turns(
        base, mode, SAMPLING["greedy"], system))
    assert answers[1]["usage"]["cache_read_input_tokens"] > 0
    for answer, row in zip(answers, rows, strict=True):
        usage = answer["usage"]
        read = usage["cache_read_input_tokens"]
        assert row.wire_format == "anthropic" and row.provider == "llama-cpp"
        assert (row.input_tokens_total, row.cache_read_tokens, row.cache_write_tokens,
                row.output_tokens) == (usage["input_tokens"] + read, read, 0,
                                       usage["output_tokens"])
        assert row.status_code == 200 and row.error_class is None
    assert [r.verdict for r in rows] == ["cold", "hit"]
    assert rows[1].predecessor_id == rows[0].record_id
    assert all(KEY not in r.to_json().decode() for r in rows)
