"""Tests for RecordingTransport / AsyncRecordingTransport under the official SDKs (httpx2)
and plain httpx, against a MockTransport serving recorded response shapes."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import itertools
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from conftest import FakeRecorder
from stableprompt import Ledger
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._transport import (
    PENDING_EXTENSION,
    AsyncRecordingTransport,
    RecordingTransport,
)
from stableprompt._wire._formats import segment_request

API_KEY = "sk-ant-api03-SECRETKEYdonotleak0123456789abcdef"
OPENAI_KEY = "sk-proj-SECRETKEYdonotleak0123456789abcdef"
SYSTEM = "You are a meticulous assistant for a billing system. " * 120
CHAT_SYSTEM = SYSTEM * 2  # above OpenAI's 2,048-token minimum (bytes/4 tokens)


class FakeProvider:
    """An exact-prefix cache with bytes/4 tokens per segment, answering in the providers'
    recorded response shapes (Anthropic Messages, OpenAI Chat and Responses; JSON or SSE).

    Anthropic: entries only at ``cache_control`` breakpoints whose prefix reaches 1,024 tokens,
    found by looking back up to 20 segments from each breakpoint. OpenAI: every segment
    boundary, reads floored to 128, 2,048 minimum. ``script`` holds canned responses served
    first (e.g. a 429 with ``retry-after``); ``extra`` is merged into each answer object.
    """

    def __init__(self, module: Any = httpx2, *, is_async: bool = False, chunk: int = 7,
                 gzip_json: bool = False) -> None:
        self.module = module
        self.is_async = is_async
        self.chunk = chunk
        self.gzip_json = gzip_json
        self.store: set[str] = set()
        self.requests: list[Any] = []
        self.script: list[Any] = []
        self.extra: dict[str, Any] = {}  # merged into Anthropic messages / Responses objects
        self.ids = itertools.count(1)

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        if self.script:
            return self.script.pop(0)
        raw = request.content
        path = request.url.path
        body = json.loads(raw)
        wire = ("anthropic" if path.endswith("/messages") else
                "openai-responses" if path.endswith("/responses") else "openai-chat")
        seg = segment_request(wire, body)
        tokens = [(s.end - s.start + 3) // 4 for s in seg.segments]
        cum = list(itertools.accumulate(tokens))
        total = cum[-1]
        if wire == "anthropic":
            marks = [i for i, s in enumerate(seg.segments) if s.breakpoint and cum[i] >= 1024]
            read = 0
            for mark in marks:  # 20-block lookback from each breakpoint
                for j in range(mark, max(-1, mark - 20), -1):
                    if seg.segments[j].prefix_digest in self.store:
                        read = max(read, cum[j])
                        break
            top = max((cum[i] for i in marks), default=0)
            write = top - read if top > read else 0
            self.store.update(seg.segments[i].prefix_digest for i in marks)
        else:
            found = max((cum[i] for i, s in enumerate(seg.segments)
                         if s.prefix_digest in self.store), default=0)
            read = found // 128 * 128 if found >= 2048 else 0
            write = 0
            self.store.update(s.prefix_digest for s in seg.segments)
        n = next(self.ids)
        stream = body.get("stream") is True
        if wire == "anthropic":
            return self._anthropic(body, n, total, read, write, stream)
        if wire == "openai-chat":
            return self._chat(body, n, total, read, stream)
        return self._responses(body, n, total, read, stream)

    # -- response shapes (from anthropic-sdk-python / openai-python recorded fixtures) --------

    def _json(self, obj: dict[str, Any]) -> Any:
        data = json.dumps(obj).encode()
        headers = {"content-type": "application/json"}
        if self.gzip_json:
            data = gzip.compress(data)
            headers["content-encoding"] = "gzip"
        return self._response(headers, [data], buffered=not self.gzip_json)

    def _sse(self, events: list[tuple[str | None, Any]]) -> Any:
        text = ""
        for name, data in events:
            if name:
                text += f"event: {name}\n"
            text += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        raw = text.encode()
        pieces = [raw[i : i + self.chunk] for i in range(0, len(raw), self.chunk)]
        return self._response({"content-type": "text/event-stream"}, pieces, buffered=False)

    def _response(self, headers: dict[str, str], pieces: list[bytes], buffered: bool) -> Any:
        if buffered:
            return self.module.Response(200, headers=headers, content=b"".join(pieces))
        if self.is_async:
            async def agen() -> AsyncIterator[bytes]:
                for piece in pieces:
                    yield piece
            return self.module.Response(200, headers=headers, content=agen())
        return self.module.Response(200, headers=headers, content=iter(pieces))

    def _anthropic(self, body: dict[str, Any], n: int, total: int, read: int, write: int,
                   stream: bool) -> Any:
        usage = {"input_tokens": total - read - write, "cache_creation_input_tokens": write,
                 "cache_read_input_tokens": read,
                 "cache_creation": {"ephemeral_5m_input_tokens": write,
                                    "ephemeral_1h_input_tokens": 0},
                 "output_tokens": 10, "service_tier": "standard",
                 "inference_geo": "not_available"}
        message = {"model": body["model"], "id": f"msg_{n:04d}", "type": "message",
                   "role": "assistant", "content": [{"type": "text", "text": "Hello there!"}],
                   "stop_reason": "end_turn", "stop_sequence": None, "usage": usage,
                   **self.extra}
        if not stream:
            return self._json(message)
        start = {**message, "content": [], "stop_reason": None,
                 "usage": {**usage, "output_tokens": 1}}
        delta_usage = {k: usage[k] for k in ("input_tokens", "cache_creation_input_tokens",
                                             "cache_read_input_tokens")}
        return self._sse([
            ("message_start", {"type": "message_start", "message": start}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("ping", {"type": "ping"}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": "Hello"}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": " there!"}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {**delta_usage, "output_tokens": 10}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    def _chat(self, body: dict[str, Any], n: int, total: int, read: int, stream: bool) -> Any:
        usage = {"prompt_tokens": total, "completion_tokens": 10, "total_tokens": total + 10,
                 "prompt_tokens_details": {"cached_tokens": read, "audio_tokens": 0},
                 "completion_tokens_details": {"reasoning_tokens": 0}}
        rid = f"chatcmpl-{n:04d}"
        if not stream:
            return self._json({
                "id": rid, "object": "chat.completion", "created": 1_760_000_000,
                "model": body["model"], "system_fingerprint": "fp_1",
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": "Hello there!",
                                         "refusal": None}}],
                "usage": usage})
        base = {"id": rid, "object": "chat.completion.chunk", "created": 1_760_000_000,
                "model": body["model"]}
        return self._sse([
            (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                "content": ""},
                                         "finish_reason": None}], "usage": None}),
            (None, {**base, "choices": [{"index": 0, "delta": {"content": "Hello there!"},
                                         "finish_reason": None}], "usage": None}),
            (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    "usage": None}),
            (None, {**base, "choices": [], "usage": usage}),
            (None, "[DONE]"),
        ])

    def _responses(self, body: dict[str, Any], n: int, total: int, read: int,
                   stream: bool) -> Any:
        usage = {"input_tokens": total, "input_tokens_details": {"cached_tokens": read},
                 "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": total + 10}
        response = {
            "id": f"resp_{n:04d}", "object": "response", "created_at": 1_760_000_000,
            "status": "completed", "model": body["model"], "error": None,
            "incomplete_details": None, "instructions": None, "metadata": {},
            "parallel_tool_calls": True, "temperature": 1.0, "top_p": 1.0,
            "tool_choice": "auto", "tools": [],
            "output": [{"type": "message", "id": f"msg_{n:04d}", "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "Hello there!",
                                     "annotations": []}]}],
            "usage": usage,
            **self.extra,
        }
        if not stream:
            return self._json(response)
        created = {**response, "status": "in_progress", "output": [], "usage": None}
        return self._sse([
            ("response.created", {"type": "response.created", "response": created,
                                  "sequence_number": 0}),
            ("response.output_text.delta", {"type": "response.output_text.delta",
                                            "item_id": f"msg_{n:04d}", "output_index": 0,
                                            "content_index": 0, "delta": "Hello there!",
                                            "sequence_number": 1}),
            ("response.completed", {"type": "response.completed", "response": response,
                                    "sequence_number": 2}),
        ])


def anthropic_sdk(fake: FakeProvider, recorder: Recorder) -> anthropic.Anthropic:
    """The official SDK, its httpx2 client wrapping the fake in a RecordingTransport."""
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(fake),
                                                      recorder=recorder))
    return anthropic.Anthropic(api_key=API_KEY, base_url="http://provider.test",
                               http_client=http, max_retries=0)


def openai_sdk(fake: FakeProvider, recorder: Recorder) -> openai.OpenAI:
    """The official OpenAI SDK over a RecordingTransport."""
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(fake),
                                                      recorder=recorder))
    return openai.OpenAI(api_key=OPENAI_KEY, base_url="http://provider.test/v1",
                         http_client=http, max_retries=0)


def conversation(turns: int) -> Any:
    """User/assistant history with ``turns`` user messages, last one with a breakpoint."""
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        if t:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        messages.append({"role": "user", "content": [{"type": "text", "text": f"q{t}"}]})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return messages


SYSTEM_BLOCKS: Any = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "calls.db", fallback_dir=tmp_path / "fallback") as opened:
        yield opened


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_sdk_calls_are_recorded_with_correct_ledger_rows(
    ledger: Ledger, stream: bool
) -> None:
    """Three turns through the official anthropic SDK: cold, hit, hit; usage, prediction,
    lineage, turn and response id land in the ledger; the SDK sees the served message."""
    fake = FakeProvider()
    recorder = Recorder(ledger, session_id="conv-1", tokenizer="bytes/4")
    client = anthropic_sdk(fake, recorder)
    for turns in (1, 2, 3):
        kwargs: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 50,
                                  "system": SYSTEM_BLOCKS, "messages": conversation(turns)}
        if stream:
            events = list(client.messages.create(stream=True, **kwargs))
            assert events[-1].type == "message_stop"
        else:
            message = client.messages.create(**kwargs)
            assert message.content[0].text == "Hello there!"
    rows = ledger.records()
    assert [r.verdict for r in rows] == ["cold", "hit", "hit"]
    assert [r.turn for r in rows] == [1, 2, 3]
    assert [r.response_id for r in rows] == ["msg_0001", "msg_0002", "msg_0003"]
    assert {r.session_id for r in rows} == {"conv-1"}
    assert {r.provider for r in rows} == {"anthropic"}
    assert len({r.lineage for r in rows}) == 1
    first, second, third = rows
    assert first.cache_read_tokens == 0 and first.cache_write_tokens == first.input_tokens_total
    assert second.cache_read_tokens and second.cache_read_tokens > 1024
    for row in (second, third):
        assert row.predicted_cache_read_tokens == row.cache_read_tokens
        assert row.input_tokens_total == row.request_tokens
        assert row.predecessor_id is not None
        assert row.status_code == 200 and row.error_class is None
        assert row.latency_ms is not None and row.latency_ms >= 0
    assert second.predecessor_id == first.record_id and third.predecessor_id == second.record_id
    if stream:
        assert all(r.ttft_ms is not None for r in rows)
        assert all(r.output_tokens == 10 for r in rows)
    else:
        assert all(r.ttft_ms is None for r in rows)
    assert recorder.records == rows


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_sdk_calls_are_recorded(ledger: Ledger, stream: bool, api: str) -> None:
    """Two turns through the official openai SDK (chat and responses, JSON and SSE): cold then
    hit, with reads within one 128-token granule of the prediction."""
    fake = FakeProvider()
    recorder = Recorder(ledger, tokenizer="bytes/4")
    client = openai_sdk(fake, recorder)
    history: Any = [{"role": "system", "content": CHAT_SYSTEM}, {"role": "user", "content": "q0"}]
    for turn in (1, 2):
        if turn == 2:
            history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "q1"}]
        if api == "chat":
            if stream:
                chunks = list(client.chat.completions.create(
                    model="gpt-4.1", messages=history, stream=True,
                    stream_options={"include_usage": True}))
                assert chunks[-1].usage is not None
            else:
                done = client.chat.completions.create(model="gpt-4.1", messages=history)
                assert done.choices[0].message.content == "Hello there!"
        else:
            if stream:
                events: list[Any] = list(client.responses.create(
                    model="gpt-4.1", input=history, stream=True))
                assert events[-1].type == "response.completed"
            else:
                response = client.responses.create(model="gpt-4.1", input=history)
                assert response.output_text == "Hello there!"
    first, second = ledger.records()
    wire = "openai-chat" if api == "chat" else "openai-responses"
    assert (first.wire_format, first.provider) == (wire, "openai")
    assert (first.verdict, second.verdict) == ("cold", "hit")
    assert second.cache_read_tokens is not None and second.cache_read_tokens >= 2048
    assert second.predicted_cache_read_tokens is not None
    assert abs(second.predicted_cache_read_tokens - second.cache_read_tokens) <= 128
    prefix = "chatcmpl-" if api == "chat" else "resp_"
    assert second.response_id == f"{prefix}0002"
    assert (second.ttft_ms is not None) == stream


def test_async_anthropic_sdk_is_recorded_streaming_and_not(ledger: Ledger) -> None:
    """AsyncAnthropic over an AsyncRecordingTransport records both call styles."""
    fake = FakeProvider(is_async=True)
    recorder = Recorder(ledger, tokenizer="bytes/4")

    async def run() -> None:
        http = httpx2.AsyncClient(transport=AsyncRecordingTransport(
            httpx2.MockTransport(fake), recorder=recorder))
        client = anthropic.AsyncAnthropic(api_key=API_KEY, base_url="http://provider.test",
                                          http_client=http, max_retries=0)
        kwargs: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 50,
                                  "system": SYSTEM_BLOCKS}
        await client.messages.create(messages=conversation(1), **kwargs)
        stream = await client.messages.create(messages=conversation(2), stream=True, **kwargs)
        async for _ in stream:
            pass
        await client.close()

    asyncio.run(run())
    first, second = ledger.records()
    assert (first.verdict, second.verdict) == ("cold", "hit")
    assert second.predicted_cache_read_tokens == second.cache_read_tokens
    assert second.ttft_ms is not None


def test_stream_closed_early_is_recorded_with_what_was_seen() -> None:
    """Breaking out of a stream records the call as incomplete (verdict unknown); Anthropic's
    message_start already carried the cache counters, so they are kept and the output count
    is unknown."""
    fake = FakeProvider(chunk=600)  # the message_delta event starts after byte 900
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_sdk(fake, recorder)
    stream = client.messages.create(model="claude-sonnet-4-6", max_tokens=50, stream=True,
                                    system=SYSTEM_BLOCKS, messages=conversation(1))
    next(iter(stream))
    stream.close()
    (record,) = recorder.records
    assert record.verdict_detail["stream"] == "closed before the end of the body"
    assert record.verdict == "unknown" and record.verdict_detail["incomplete"] is True
    assert record.output_tokens is None
    assert record.cache_write_tokens is not None and record.cache_write_tokens > 1024


def test_interrupted_chat_stream_without_usage_is_unknown() -> None:
    """A chat stream cut before its usage chunk: verdict unknown, reason kept."""
    fake = FakeProvider(chunk=100_000)
    recorder = Recorder(tokenizer="bytes/4")
    data = (b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1",'
            b'"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n')
    fake.script.append(httpx2.Response(200, headers={"content-type": "text/event-stream"},
                                       content=iter([data])))
    client = openai_sdk(fake, recorder)
    list(client.chat.completions.create(model="gpt-4.1", stream=True,
                                        messages=[{"role": "user", "content": "hi"}]))
    (record,) = recorder.records
    assert record.verdict == "unknown"
    assert record.cache_read_tokens is None and record.input_tokens_total is None
    assert "usage" in str(record.verdict_detail["unknown_reason"])
    assert record.response_id == "c1"


def test_bytes_pass_through_unchanged_both_ways_with_plain_httpx() -> None:
    """Under plain httpx the request bytes reach the server as sent (odd whitespace kept) and
    the response bytes (gzip-encoded on the wire) reach the caller as served."""
    fake = FakeProvider(httpx, gzip_json=True)
    recorder = Recorder(tokenizer="bytes/4")
    raw = ('{"model": "claude-sonnet-4-6",  "max_tokens":5,\n "system": '
           + json.dumps(SYSTEM_BLOCKS) + ', "messages": [{"role":"user","content":"hi"}]}'
           ).encode()
    with httpx.Client(transport=RecordingTransport(httpx.MockTransport(fake),
                                                   recorder=recorder)) as client:
        response = client.post("http://provider.test/v1/messages", content=raw)
        served = response.json()
    assert fake.requests[0].content == raw
    assert served["id"] == "msg_0001"
    (record,) = recorder.records
    assert record.verdict == "cold" and record.cache_write_tokens
    assert response.extensions[PENDING_EXTENSION].record is record


def test_other_endpoints_pass_through_unrecorded() -> None:
    """GETs, token counting and non-JSON bodies are forwarded but not recorded."""
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        return httpx2.Response(200, json={"data": []})

    recorder = Recorder(tokenizer="bytes/4")
    with httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(handler),
                                                    recorder=recorder)) as client:
        client.get("http://provider.test/v1/models")
        client.post("http://provider.test/v1/messages/count_tokens", json={"messages": []})
        client.post("http://provider.test/v1/messages", content=b"not json")
    assert seen == ["/v1/models", "/v1/messages/count_tokens", "/v1/messages"]
    assert recorder.records == []


def test_bodies_of_calls_that_are_not_recorded_are_never_read() -> None:
    """Other endpoints (files, Assistants thread messages) pass through with their streamed
    request body untouched: the transport decides from the path before reading anything."""
    pulled: list[str] = []

    def body(path: str) -> Iterator[bytes]:
        pulled.append(path)
        yield json.dumps({"role": "user", "content": "hello", "messages": []}).encode()

    class Inner(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json={"id": "x", "usage": {"input_tokens": 1}})

    recorder = Recorder(tokenizer="bytes/4")
    with httpx.Client(transport=RecordingTransport(Inner(), recorder=recorder)) as client:
        for path in ("/v1/files", "/v1/threads/thread_1/messages", "/v1/messages"):
            client.post(f"http://provider.test{path}", content=body(path))
    assert pulled == ["/v1/messages"]
    assert [r.wire_format for r in recorder.records] == ["anthropic"]


def test_a_failing_ledger_lookup_is_logged_once(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """A ledger whose reads fail: calls on three lineages and sessions are all recorded, and
    the failure is logged once per recorder, not once per lineage."""

    class ReadFails(Ledger):
        def recent_for_lineage(self, lineage: str, *, limit: int = 32,
                               on_invalid: Any = None) -> list[Any]:
            raise RuntimeError("disk on fire")

        def iter_records(self, **filters: Any) -> Any:
            raise RuntimeError("disk on fire")

    caplog.set_level(logging.WARNING, logger="stableprompt.recorder")
    with ReadFails(tmp_path / "calls.db") as ledger:
        recorder = Recorder(ledger, tokenizer="bytes/4")
        client = anthropic_sdk(FakeProvider(), recorder)
        for index in range(3):
            system: Any = [{"type": "text", "text": f"{SYSTEM} agent {index}",
                            "cache_control": {"type": "ephemeral"}}]
            client.messages.create(model="claude-sonnet-4-6", max_tokens=5, system=system,
                                   messages=conversation(1),
                                   metadata={"user_id": f"agent-{index}"})
    assert [r.verdict for r in recorder.records] == ["cold"] * 3
    assert caplog.text.count("ledger lookup failed") == 1


def test_transport_errors_are_recorded_and_reraised() -> None:
    """A connection failure is recorded (ProviderConnectionError, unknown) and the SDK sees
    its own exception."""
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    recorder = Recorder(tokenizer="bytes/4")
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(handler),
                                                      recorder=recorder))
    client = anthropic.Anthropic(api_key=API_KEY, base_url="http://provider.test",
                                 http_client=http, max_retries=0)
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=5,
                               messages=[{"role": "user", "content": "hi"}])
    (record,) = recorder.records
    assert record.error_class == "ProviderConnectionError"
    assert record.status_code is None and record.verdict == "unknown"


def test_http_errors_are_recorded_and_do_not_become_predecessors() -> None:
    """A 429 is recorded (ProviderHTTPError, error type) and the next success is still cold;
    the retried request keeps the turn of the failed attempt (retry flag)."""
    fake = FakeProvider()
    fake.script.append(httpx2.Response(
        429, json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}))
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_sdk(fake, recorder)
    kwargs: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 5,
                              "system": SYSTEM_BLOCKS, "messages": conversation(1)}
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(**kwargs)
    client.messages.create(**kwargs)
    failed, ok = recorder.records
    assert (failed.status_code, failed.error_class) == (429, "ProviderHTTPError")
    assert failed.verdict_detail["error_type"] == "rate_limit_error"
    assert failed.verdict == "unknown" and ok.verdict == "cold"
    assert (failed.turn, ok.turn) == (1, 1)
    assert ok.verdict_detail["retry"] is True and "retry" not in failed.verdict_detail


def test_session_head_change_is_client_mutation_through_the_sdk() -> None:
    """A clock in the system prompt, seen through the SDK: the second call is a
    client_mutation naming system[0] and volatile-token."""
    fake = FakeProvider()
    recorder = Recorder(session_id="s", tokenizer="bytes/4")
    client = anthropic_sdk(fake, recorder)
    for minute, turns in ((0, 1), (1, 2)):
        system: Any = [{"type": "text", "text": f"{SYSTEM} Now: 2026-11-30T10:0{minute}:00Z",
                   "cache_control": {"type": "ephemeral"}}]
        client.messages.create(model="claude-sonnet-4-6", max_tokens=5, system=system,
                               messages=conversation(turns))
    first, second = recorder.records
    assert first.lineage != second.lineage
    assert second.verdict == "client_mutation"
    assert (second.verdict_detail["segment"], second.verdict_detail["cause"]) == (
        "system[0]", "volatile-token")


def test_api_key_never_reaches_ledger_spill_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the database unusable (records spill to JSONL) and debug logging on, the API key
    is in none of the database, spill files, records or log output."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the database directory should be")
    fallback = tmp_path / "fallback"
    caplog.set_level(logging.DEBUG)
    good = Ledger(tmp_path / "ok" / "calls.db", store_content=True)
    bad = Ledger(blocker / "calls.db", fallback_dir=fallback, store_content=True)
    for led in (good, bad):
        recorder = Recorder(led, tokenizer="bytes/4", store_content=True)
        client = anthropic_sdk(FakeProvider(), recorder)
        with pytest.warns(UserWarning) if led is bad else _nothing():
            client.messages.create(model="claude-sonnet-4-6", max_tokens=5,
                                   system=SYSTEM_BLOCKS, messages=conversation(1))
        assert recorder.records[0].content is not None
    good.close()
    bad.close()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".spill.jsonl") for p in files)
    assert any(p.name == "calls.db" for p in files)
    for path in files:
        assert API_KEY.encode() not in path.read_bytes(), path
    assert API_KEY not in caplog.text


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        self.rfile.read(length)
        body = json.dumps({"id": "chatcmpl-real", "object": "chat.completion", "choices": [],
                           "usage": {"prompt_tokens": 12, "completion_tokens": 1,
                                     "prompt_tokens_details": {"cached_tokens": 0}}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize("module", [httpx, httpx2])
def test_default_wrapped_transport_sends_over_real_loopback_http(module: Any) -> None:
    """wrapped=None uses the request's own module's HTTPTransport (httpx or httpx2) and records
    the call, over a real loopback socket."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        recorder = Recorder(tokenizer="bytes/4", provider="vllm")
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
        with module.Client(transport=RecordingTransport(recorder=recorder)) as client:
            response = client.post(url, json={"model": "m", "messages": [
                {"role": "user", "content": "hi"}]})
        assert response.json()["id"] == "chatcmpl-real"
    finally:
        server.shutdown()
        server.server_close()
    (record,) = recorder.records
    assert (record.provider, record.wire_format) == ("vllm", "openai-compatible")
    assert record.input_tokens_total == 12 and record.response_id == "chatcmpl-real"


# ---------------------------------------------------------------------------- recorder state


@pytest.mark.parametrize("store_content", [False, True])
def test_fresh_process_finds_its_predecessor_in_the_ledger(tmp_path: Path,
                                                           store_content: bool) -> None:
    """A new Recorder on the same ledger compares its first call with the last ledger row of
    the lineage (hit, predecessor_id set; exact with stored content, and without it by the
    row's segment outline, ``segment_digests``) and continues the session's turn count."""
    path = tmp_path / "calls.db"
    fake = FakeProvider()
    kwargs: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 5,
                              "system": SYSTEM_BLOCKS}
    with Ledger(path, store_content=store_content) as ledger:
        first = Recorder(ledger, tokenizer="bytes/4", store_content=store_content,
                         session_id="conv")
        anthropic_sdk(fake, first).messages.create(messages=conversation(1), **kwargs)
    with Ledger(path, store_content=store_content) as ledger:
        second = Recorder(ledger, tokenizer="bytes/4", store_content=store_content,
                          session_id="conv")
        anthropic_sdk(fake, second).messages.create(messages=conversation(2), **kwargs)
        old, new = ledger.records()
    assert new.verdict == "hit" and new.predecessor_id == old.record_id
    assert (old.turn, new.turn) == (1, 2)
    assert new.predicted_cache_read_tokens == new.cache_read_tokens
    assert "predecessor_body" not in new.verdict_detail  # compared segment by segment
    assert old.segment_digests is not None and (old.content is None) is not store_content


def test_recorder_failures_never_break_the_call(caplog: pytest.LogCaptureFixture) -> None:
    """A tokenizer that raises and a ledger whose write raises: the SDK call still returns,
    a record (verdict unknown, analysis_error) is kept and the problem is logged."""

    class Broken:
        name = "broken"

        def encode(self, text: str) -> list[int]:
            raise RuntimeError("tokenizer exploded")

        def count(self, text: str) -> int:
            raise RuntimeError("tokenizer exploded")

    class BadLedger:
        def last_for_lineage(self, lineage: str) -> None:
            raise RuntimeError("read failed")

        def write(self, record: Any) -> None:
            raise RuntimeError("write failed")

    caplog.set_level(logging.WARNING, logger="stableprompt.recorder")
    recorder = Recorder(BadLedger(), tokenizer=Broken())  # type: ignore[arg-type]
    message = anthropic_sdk(FakeProvider(), recorder).messages.create(
        model="claude-sonnet-4-6", max_tokens=5, system=SYSTEM_BLOCKS, messages=conversation(1))
    assert message.id == "msg_0001"
    (record,) = recorder.records
    assert record.verdict == "unknown" and record.cache_write_tokens is not None
    assert "tokenizer exploded" in str(record.verdict_detail["analysis_error"])
    assert "tokenizer exploded" in caplog.text and "write failed" in caplog.text


def test_concurrent_calls_from_threads_are_all_recorded() -> None:
    """Eight threads (eight conversations) share one transport and recorder: every call gets
    one record; each conversation reads cold, hit, hit with turns 1..3."""
    fake = FakeProvider(chunk=64)
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_sdk(fake, recorder)

    def worker(index: int) -> None:
        system: Any = [{"type": "text", "text": f"{SYSTEM} agent {index}",
                        "cache_control": {"type": "ephemeral"}}]
        for turn in range(1, 4):
            stream = client.messages.create(
                model="claude-sonnet-4-6", max_tokens=5, system=system,
                messages=conversation(turn), metadata={"user_id": f"agent-{index}"},
                stream=True)
            for _ in stream:
                pass

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(recorder.records) == 24
    by_session: dict[str | None, list[tuple[int, str]]] = {}
    for record in recorder.records:
        by_session.setdefault(record.session_id, []).append((record.turn or 0, record.verdict))
    assert sorted(by_session, key=str) == [f"agent-{i}" for i in range(8)]
    for calls in by_session.values():
        assert sorted(calls) == [(1, "cold"), (2, "hit"), (3, "hit")]


# ---------------------------------------------------------------------------- fake recorder


def test_the_transport_drives_any_call_recorder(fake_recorder: FakeRecorder) -> None:
    """With a stand-in recorder: the exact request bytes go to ``start``, a streamed answer
    reaches the caller unchanged and ends as one Observation with the whole body, a path the
    recorder declines is not started, and a send error is finished and re-raised unchanged."""
    chunks = [b'{"id": "chatcmpl-1", ', b'"usage": null}']

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/down/chat/completions":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, content=iter(chunks),
                              headers={"content-type": "application/json"})

    content = b'{"model": "m", "messages": []}'
    transport = RecordingTransport(httpx.MockTransport(handler), recorder=fake_recorder)
    with httpx.Client(transport=transport, base_url="http://provider.test") as client:
        with client.stream("POST", "/v1/chat/completions", content=content) as response:
            assert b"".join(response.iter_raw()) == b"".join(chunks)
        assert client.get("/health").status_code == 200
        with pytest.raises(httpx.ConnectError, match="refused"):
            client.post("/v1/down/chat/completions", content=content)
    assert fake_recorder.bodies == [content, content]
    (observation,) = fake_recorder.observations
    assert (observation.status_code, observation.body) == (200, b"".join(chunks))
    assert observation.incomplete is None and not observation.detail
    (failed,) = fake_recorder.finished
    assert isinstance(failed["error"], httpx.ConnectError)


def test_a_stream_closed_early_is_observed_as_incomplete(fake_recorder: FakeRecorder) -> None:
    """A JSON answer the caller closes before reading ends as an Observation saying so."""
    transport = RecordingTransport(httpx.MockTransport(lambda request: httpx.Response(
        200, content=iter([b"{}"]), headers={"content-type": "application/json"})),
        recorder=fake_recorder)
    with httpx.Client(transport=transport) as client, client.stream(
            "POST", "http://provider.test/v1/responses", content=b"{}"):
        pass
    (observation,) = fake_recorder.observations
    assert observation.body is None
    assert observation.incomplete == "the response body was closed before its end"
    assert observation.detail == {"stream": "closed before the end of the body"}


@pytest.mark.parametrize("in_thread", [False, True])
def test_a_stream_dropped_unread_still_gets_its_row(in_thread: bool) -> None:
    """An SDK stream object dropped without reading or closing it (the review's repro:
    ``s = client.messages.create(stream=True, ...); del s``) is recorded as incomplete once
    collected, as a stream closed early is; a later call is recorded as usual."""
    import gc

    fake = FakeProvider(chunk=600)
    recorder = Recorder(tokenizer="bytes/4")
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(fake),
                                                      recorder=recorder,
                                                      record_in_thread=in_thread))
    client = anthropic.Anthropic(api_key=API_KEY, base_url="http://provider.test",
                                 http_client=http, max_retries=0)
    stream = client.messages.create(model="claude-sonnet-4-6", max_tokens=50, stream=True,
                                    system=SYSTEM_BLOCKS, messages=conversation(1))
    del stream
    gc.collect()
    client.messages.create(model="claude-sonnet-4-6", max_tokens=50, system=SYSTEM_BLOCKS,
                           messages=conversation(2))
    assert recorder.flush(10)
    dropped, later = recorder.records
    assert dropped.verdict == "unknown" and dropped.verdict_detail["incomplete"] is True
    assert later.verdict_detail.get("incomplete") is None
    recorder.close()


def _sdk_turns(api: str, fake: FakeProvider, recorder: Recorder, turns: int) -> None:
    """``turns`` requests of one growing conversation through an official SDK: tool calls with
    float, non-ASCII, escaped and nested arguments, a breakpoint moving to the last message."""
    history: list[dict[str, Any]] = []
    if api == "anthropic":
        client: Any = anthropic_sdk(fake, recorder)
        for t in range(turns):
            for message in history:
                for block in message["content"]:
                    block.pop("cache_control", None)
            history.append({"role": "user", "content": [
                {"type": "text", "text": f"q{t} \u00e9\u2028 \"quoted\" \\ {0.1 * t} 1e-05"}]})
            history[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
            client.messages.create(model="claude-sonnet-4-6", max_tokens=50,
                                   system=SYSTEM_BLOCKS, messages=history)
            history.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{t}", "name": "lookup",
                 "input": {"x": 1e16 * t, "y": [1.5, -0.0, t], "s": "\u00fc\n",
                           "tiny": 1e-05 if t == 4 else 0.5}}]})
            history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{t}", "content": f"r{t} \u4e2d"}]})
        return
    client = openai_sdk(fake, recorder)
    history = [{"role": "system", "content": CHAT_SYSTEM}]
    for t in range(turns):
        history.append({"role": "user", "content": f"q{t} \u00e9 {0.1 * t} \\u0041"})
        if api == "chat":
            client.chat.completions.create(model="gpt-4.1", messages=history)
        else:
            client.responses.create(model="gpt-4.1", input=history)
        history.append({"role": "assistant", "content": f"a{t} {1e16 * t} \u00fc"})


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_sdk_bodies_are_segmented_from_their_new_items(
        api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request an official SDK serialized (compact, ``ensure_ascii=False``) that continues
    the conversation's previous one is not parsed whole (the transport path's cost grows with
    the turn, not the conversation, and makes no objects for the history it already has):
    only the first body of the conversation is decoded whole, a later one only its new items
    where they re-serialize to their bytes (``1e-05`` does not, orjson writes ``0.00001``: once
    the history holds it, that conversation's later bodies are parsed whole again, their
    bytes no longer being their compact dump; the one that added it still reuses). Every
    record equals a recorder's that parses every body whole."""
    import stableprompt._recording._memory as memory_module
    from stableprompt._canonical import loads as real_loads
    from stableprompt._recording._memory import CallMemory

    whole: list[int] = []

    def counting(data: Any) -> Any:
        if len(data) > 5000:  # a request body (a response here is < 1 KB)
            whole.append(len(data))
        return real_loads(data)

    monkeypatch.setattr(memory_module, "loads", counting)
    ours = Recorder(tokenizer="bytes/4")
    _sdk_turns(api, FakeProvider(), ours, 7)
    decoded_whole = list(whole)
    monkeypatch.setattr(CallMemory, "segment_rendered", lambda *args, **kwargs: None)
    reference = Recorder(tokenizer="bytes/4")
    _sdk_turns(api, FakeProvider(), reference, 7)
    assert len(whole) - len(decoded_whole) == 7  # the reference decodes every body whole
    # anthropic: the first two (the breakpoint moved off the only message) and the one after
    # the 1e-05 entered the history; the others: the first only
    assert len(decoded_whole) == (3 if api == "anthropic" else 1), decoded_whole
    assert decoded_whole[0] == whole[len(decoded_whole)]  # the first body, both times
    fields = ("request_fingerprint", "lineage", "request_tokens", "predicted_cache_read_tokens",
              "lcp_tokens", "verdict", "turn", "model", "wire_format", "cache_read_tokens",
              "divergence_segment", "divergence_cause")
    mine = [{f: getattr(r, f, None) for f in fields} for r in ours.records]
    theirs = [{f: getattr(r, f, None) for f in fields} for r in reference.records]
    assert mine == theirs
    assert all(r.request_fingerprint for r in ours.records)


# ---------------------------------------------------------------------------- diagnostics


@pytest.mark.parametrize("in_thread", [False, True])
def test_recorder_diagnostics_ask_through_the_official_sdk(in_thread: bool) -> None:
    """Recorder(diagnostics=True) under the official anthropic SDK: every request carries the
    beta value (merged with the SDK's own) and diagnostics.previous_message_id (null, then
    the response our attribution compares with); the server's reason is joined to ours."""
    fake = FakeProvider()
    fake.extra = {"diagnostics": {"cache_miss_reason": {
        "type": "system_changed", "cache_missed_input_tokens": 1400}}}
    recorder = Recorder(tokenizer="bytes/4", diagnostics=True)
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(fake),
                                                      recorder=recorder,
                                                      record_in_thread=in_thread))
    client = anthropic.Anthropic(api_key=API_KEY, base_url="http://provider.test",
                                 http_client=http, max_retries=0)
    systems = [SYSTEM_BLOCKS, [{**SYSTEM_BLOCKS[0], "text": "Today is Monday. " + SYSTEM}]]
    for turn, system in enumerate(systems):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=50, system=system,
                               messages=conversation(turn + 1),
                               extra_headers={"anthropic-beta": "other-beta-2026-01-01"})
    recorder.flush()
    sent = [json.loads(r.content) for r in fake.requests]
    assert [r.headers["anthropic-beta"] for r in fake.requests] == [
        "other-beta-2026-01-01,cache-diagnosis-2026-04-07"] * 2
    assert sent[0]["diagnostics"] == {"previous_message_id": None}
    assert sent[1]["diagnostics"] == {"previous_message_id": "msg_0001"}
    second = recorder.records[1]
    assert second.verdict == "client_mutation"
    assert second.verdict_detail["segment_kind"] == "system"
    assert second.verdict_detail["server_diagnosis"] == {
        "reason": "system_changed", "missed_tokens": 1400, "agreement": "agree",
        "why": "both name system_changed"}
    recorder.close()


def test_recorder_diagnostics_on_responses_compare_from_the_second_call() -> None:
    """On OpenAI Responses, prompt_cache_options.comparison_response_id is added from the second
    call on (merged into options the caller set); Chat Completions bodies are left alone."""
    fake = FakeProvider()
    fake.extra = {"prompt_cache_diagnostics": {"type": "cache_hit"}}
    recorder = Recorder(tokenizer="bytes/4", diagnostics=True)
    client = openai_sdk(fake, recorder)
    history: list[dict[str, Any]] = [{"role": "system", "content": CHAT_SYSTEM},
                                     {"role": "user", "content": "q0"}]
    client.responses.create(model="gpt-5.6", input=history)  # type: ignore[arg-type]
    history += [{"role": "assistant", "content": "a0"}, {"role": "user", "content": "q1"}]
    client.responses.create(model="gpt-5.6", input=history,  # type: ignore[arg-type]
                            extra_body={"prompt_cache_options": {"ttl": "30m"}})
    client.chat.completions.create(model="gpt-4.1", messages=history)  # type: ignore[arg-type]
    first, second, chat = (json.loads(r.content) for r in fake.requests)
    assert "prompt_cache_options" not in first
    assert second["prompt_cache_options"] == {"ttl": "30m", "comparison_response_id": "resp_0001"}
    assert "prompt_cache_options" not in chat and "diagnostics" not in chat
    joined = recorder.records[1].verdict_detail["server_diagnosis"]
    assert isinstance(joined, dict)
    assert joined["reason"] == "cache_hit" and joined["agreement"] == "agree"


def test_diagnostics_never_rewrite_what_would_change_other_bytes() -> None:
    """A body whose existing ``prompt_cache_options`` would have to be re-serialized is sent
    as it is when re-serializing changes other bytes (an integer beyond 64 bits read as a
    float; nesting past 255 levels that cannot be written): never an exception, never a
    changed value, one record each (found by the session's reviewer)."""
    seen: list[bytes] = []

    def upstream(request: Any) -> Any:
        seen.append(request.content)
        n = len(seen)
        return httpx2.Response(200, json={
            "id": f"resp_{n}", "object": "response", "status": "completed", "model": "gpt-5.6",
            "output": [], "usage": {"input_tokens": 3000, "output_tokens": 1,
                                    "input_tokens_details": {"cached_tokens": 0}}})

    recorder = Recorder(tokenizer="bytes/4", diagnostics=True)
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(upstream),
                                                      recorder=recorder))
    client = openai.OpenAI(api_key=OPENAI_KEY, base_url="http://provider.test/v1",
                           http_client=http, max_retries=0)
    history: list[dict[str, Any]] = [{"role": "system", "content": CHAT_SYSTEM},
                                     {"role": "user", "content": "q0"}]
    client.responses.create(model="gpt-5.6", input=history)  # type: ignore[arg-type]
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    big = {"type": "function", "name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer",
                                               "maximum": 18446744073709551617}}}}
    for extra in ({"tools": [big]}, {"metadata": {"deep": deep}}):
        raw = json.dumps({"model": "gpt-5.6", "input": history,
                          "prompt_cache_options": {"ttl": "30m"}, **extra}).encode()
        response = client.post("/responses", content=raw, cast_to=httpx2.Response,
                               options={"headers": {"content-type": "application/json"}})
        assert response.status_code == 200
        assert seen[-1] == raw  # sent byte for byte
    assert len(recorder.records) == 3
