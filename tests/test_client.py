"""Tests for the provider clients (sync and async) over httpx MockTransport."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from stableprompt import (
    ConfigurationError,
    InputError,
    Ledger,
    PromptBuilder,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderRequest,
    ProviderTimeoutError,
)
from stableprompt._canonical import wire_json
from stableprompt._client import (
    DIAGNOSTICS_BETA,
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    EventStream,
    OpenAIClient,
    OpenAICompatibleClient,
    retry_after_s,
)
from stableprompt._recording._recorder import Recorder
from test_transport import API_KEY, CHAT_SYSTEM, OPENAI_KEY, SYSTEM, FakeProvider

MODEL = "claude-sonnet-4-6"


def anthropic_client(fake: FakeProvider, recorder: Recorder | None = None,
                     **kwargs: Any) -> AnthropicClient:
    """An AnthropicClient whose transport is the fake provider."""
    return AnthropicClient(API_KEY, base_url="http://provider.test",
                           recorder=recorder or Recorder(tokenizer="bytes/4"),
                           transport=httpx.MockTransport(fake), **kwargs)


def rendered_turns(turns: int) -> list[ProviderRequest]:
    """Anthropic requests for ``turns`` turns of one conversation, rendered by the builder
    (head breakpoint, history breakpoint, a clock in the volatile tail)."""
    head = (PromptBuilder(tokenizer="bytes/4").system(SYSTEM)
            .tool({"name": "get_invoice", "description": "Fetch an invoice.",
                   "input_schema": {"type": "object", "properties": {}}})
            .tail_slot("clock").freeze())
    conversation = head.conversation()
    out = []
    for t in range(turns):
        if t:
            conversation.assistant(f"answer {t}")
        conversation.user(f"question {t}")
        rendered = conversation.render(tail={"clock": f"10:{t:02d}"})
        out.append(rendered.to_anthropic(model=MODEL, max_tokens=50))
    return out


def chat_body(turns: int) -> dict[str, Any]:
    """An OpenAI chat body above the 2,048-token minimum."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": CHAT_SYSTEM}]
    for t in range(turns):
        if t:
            messages.append({"role": "assistant", "content": "ok"})
        messages.append({"role": "user", "content": f"q{t}"})
    return {"model": "gpt-4.1", "messages": messages}


def retry_sleeps(client: Any) -> list[float]:
    """Replace the client's sleep with a recorder of the requested delays."""
    slept: list[float] = []
    client._sleep = slept.append
    return slept


# ---------------------------------------------------------------------------- sending


def test_anthropic_client_sends_exact_bytes_and_records_each_turn(tmp_path: Path) -> None:
    """Rendered requests go out byte for byte; the ledger shows cold, hit, hit."""
    fake = FakeProvider(httpx)
    with Ledger(tmp_path / "calls.db") as ledger:
        client = anthropic_client(fake, Recorder(ledger, tokenizer="bytes/4"))
        requests = rendered_turns(3)
        answers = [client.send(r) for r in requests]
        rows = ledger.records()
    assert [a["id"] for a in answers] == ["msg_0001", "msg_0002", "msg_0003"]
    assert [r.content for r in fake.requests] == [r.content for r in requests]
    assert [r.verdict for r in rows] == ["cold", "hit", "hit"]
    assert all(r.predicted_cache_read_tokens == r.cache_read_tokens for r in rows[1:])
    assert client.last_record == rows[-1]
    sent = fake.requests[0]
    assert sent.headers["x-api-key"] == API_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.url == "http://provider.test/v1/messages"


def test_dict_bodies_are_serialized_once_in_insertion_order() -> None:
    """A dict body is sent as wire JSON in its own key order, and not modified."""
    fake = FakeProvider(httpx)
    client = OpenAIClient(OPENAI_KEY, base_url="http://provider.test/v1",
                          transport=httpx.MockTransport(fake))
    body = chat_body(1)
    before = json.dumps(body)
    answer = client.send(body)
    assert answer["choices"][0]["message"]["content"] == "Hello there!"
    assert fake.requests[0].content == wire_json(body)
    assert fake.requests[0].url == "http://provider.test/v1/chat/completions"
    assert fake.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert json.dumps(body) == before


def test_streaming_returns_events_and_records_at_the_end() -> None:
    """send(stream=True) yields decoded events; the record exists once the stream ends."""
    fake = FakeProvider(httpx)
    client = anthropic_client(fake)
    request = rendered_turns(1)[0]
    stream = client.send(request, stream=True)
    assert isinstance(stream, EventStream) and stream.record is None
    events = list(stream)
    assert events[0]["type"] == "message_start"
    assert events[-1]["type"] == "message_stop"
    assert stream.record is not None and stream.record.ttft_ms is not None
    assert stream.record.verdict == "cold"
    sent = fake.requests[0].content
    assert sent.startswith(request.content[:-1]) and sent.endswith(b',"stream":true}')


def test_chat_stream_adds_include_usage_and_records_usage() -> None:
    """Streaming chat asks for the usage chunk (stream_options.include_usage) when absent."""
    fake = FakeProvider(httpx)
    client = OpenAIClient(OPENAI_KEY, base_url="http://provider.test",
                          transport=httpx.MockTransport(fake))
    with client.send(chat_body(1), stream=True) as stream:
        chunks = list(stream)
    assert chunks[-1]["usage"]["prompt_tokens"] > 2048
    sent = json.loads(fake.requests[0].content)
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert stream.record is not None
    assert stream.record.input_tokens_total == chunks[-1]["usage"]["prompt_tokens"]


def test_responses_requests_go_to_the_responses_endpoint() -> None:
    """A body with ``input`` is a Responses request."""
    fake = FakeProvider(httpx)
    client = OpenAIClient(OPENAI_KEY, base_url="http://provider.test",
                          transport=httpx.MockTransport(fake))
    answer = client.send({"model": "gpt-4.1", "input": [{"role": "user", "content": "hi"}]})
    assert answer["id"] == "resp_0001"
    assert fake.requests[0].url.path == "/v1/responses"
    assert client.last_record is not None
    assert client.last_record.wire_format == "openai-responses"


def test_wrong_wire_format_and_stream_conflicts_raise_input_errors() -> None:
    """A client refuses other providers' requests and contradictory stream settings."""
    client = anthropic_client(FakeProvider(httpx))
    chat = ProviderRequest("openai-chat", "/v1/chat/completions", wire_json(chat_body(1)))
    with pytest.raises(InputError) as wrong:
        client.send(chat)
    assert wrong.value.code == "client-wire-format"
    with pytest.raises(InputError) as conflict:
        client.send({**json.loads(rendered_turns(1)[0].content), "stream": True}, stream=False)
    assert conflict.value.code == "client-body-conflict"


# ---------------------------------------------------------------------------- retries, errors


def test_retries_honour_retry_after_then_back_off_with_jitter() -> None:
    """429 with retry-after: 2 waits 2 s; a 503 without it waits backoff*2**attempt*[0.5, 1)."""
    fake = FakeProvider(httpx)
    fake.script += [
        httpx.Response(429, headers={"retry-after": "2"},
                       json={"type": "error", "error": {"type": "rate_limit_error"}}),
        httpx.Response(503, json={"type": "error", "error": {"type": "overloaded_error"}}),
    ]
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_client(fake, recorder, max_retries=2, backoff_s=0.5)
    slept = retry_sleeps(client)
    answer = client.send(rendered_turns(1)[0])
    assert answer["id"] == "msg_0001"
    assert slept[0] == 2.0 and 0.5 <= slept[1] < 1.0
    assert [r.status_code for r in recorder.records] == [429, 503, 200]
    assert [r.error_class for r in recorder.records] == ["ProviderHTTPError"] * 2 + [None]
    assert recorder.records[-1].verdict == "cold"


def test_retries_are_bounded_and_the_last_error_is_raised() -> None:
    """After max_retries the mapped error is raised, marked retryable, status kept."""
    fake = FakeProvider(httpx)
    fake.script += [httpx.Response(500, text="boom")] * 3
    client = anthropic_client(fake, max_retries=2)
    slept = retry_sleeps(client)
    with pytest.raises(ProviderHTTPError) as raised:
        client.send(rendered_turns(1)[0])
    assert raised.value.status_code == 500 and raised.value.retryable
    assert raised.value.body == "boom"
    assert len(slept) == 2 and len(fake.requests) == 3


def test_client_errors_are_not_retried() -> None:
    """A 400 is raised at once, not retryable."""
    fake = FakeProvider(httpx)
    fake.script.append(httpx.Response(400, json={"error": {"type": "invalid_request_error"}}))
    client = anthropic_client(fake)
    slept = retry_sleeps(client)
    with pytest.raises(ProviderHTTPError) as raised:
        client.send(rendered_turns(1)[0])
    assert raised.value.status_code == 400 and not raised.value.retryable
    assert slept == [] and len(fake.requests) == 1


@pytest.mark.parametrize(
    ("exc", "mapped"),
    [(httpx.ConnectError, ProviderConnectionError), (httpx.ReadTimeout, ProviderTimeoutError)],
)
def test_transport_failures_are_retried_then_mapped(exc: type[Exception],
                                                    mapped: type[Exception]) -> None:
    """Connection errors and timeouts are retried, then raised as our retryable errors."""
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise exc("down", request=request)  # type: ignore[call-arg]

    recorder = Recorder(tokenizer="bytes/4")
    client = AnthropicClient(API_KEY, base_url="http://provider.test", recorder=recorder,
                             transport=httpx.MockTransport(handler), max_retries=1)
    slept = retry_sleeps(client)
    with pytest.raises(mapped) as raised:
        client.send(rendered_turns(1)[0])
    assert raised.value.retryable  # type: ignore[attr-defined]
    assert len(calls) == 2 and len(slept) == 1
    assert [r.error_class for r in recorder.records] == [mapped.__name__] * 2


def test_a_read_timeout_on_a_json_body_is_retried() -> None:
    """A ReadTimeout while reading a non-streaming body is retried like a failed send; the
    failed attempt is recorded as ProviderTimeoutError and the retry answers."""
    fake = FakeProvider(httpx)

    class Stalls(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b'{"id": "msg_'
            raise httpx.ReadTimeout("read timed out")

    fake.script.append(httpx.Response(200, headers={"content-type": "application/json"},
                                      stream=Stalls()))
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_client(fake, recorder, max_retries=1)
    slept = retry_sleeps(client)
    answer = client.send(rendered_turns(1)[0])
    assert answer["id"] == "msg_0001"
    assert len(fake.requests) == 2 and len(slept) == 1
    failed, ok = recorder.records
    assert (failed.error_class, failed.verdict) == ("ProviderTimeoutError", "unknown")
    assert (ok.error_class, ok.verdict, ok.turn) == (None, "cold", 1)
    assert ok.verdict_detail["retry"] is True


def test_invalid_json_body_raises_provider_error() -> None:
    """A 200 whose body is not JSON raises ProviderError (provider-invalid-json)."""
    fake = FakeProvider(httpx)
    fake.script.append(httpx.Response(200, text="<html>"))
    with pytest.raises(Exception) as raised:
        anthropic_client(fake).send(rendered_turns(1)[0])
    assert getattr(raised.value, "code", "") == "provider-invalid-json"


# ---------------------------------------------------------------------------- keys


@pytest.mark.parametrize(
    ("cls", "variable"), [(AnthropicClient, "ANTHROPIC_API_KEY"), (OpenAIClient, "OPENAI_API_KEY")]
)
def test_missing_api_key_names_the_variable(monkeypatch: pytest.MonkeyPatch, cls: Any,
                                            variable: str) -> None:
    """No key argument and no variable: ConfigurationError naming the variable."""
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigurationError) as raised:
        cls(transport=httpx.MockTransport(FakeProvider(httpx)))
    assert variable in str(raised.value) and raised.value.code == "api-key-missing"


def test_api_key_from_environment_is_sent_and_redacted_in_repr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The documented variable supplies the key; repr never shows it."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    fake = FakeProvider(httpx)
    client = AnthropicClient(base_url="http://provider.test",
                             transport=httpx.MockTransport(fake))
    client.send(rendered_turns(1)[0])
    assert fake.requests[0].headers["x-api-key"] == API_KEY
    assert API_KEY not in repr(client) and "[REDACTED]" in repr(client)


def test_api_key_never_reaches_ledger_spill_errors_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Even when the server echoes the key in an error body and the ledger spills to JSONL,
    the key is in no file, no record, no error message and no log line."""
    caplog.set_level(logging.DEBUG)
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    fake = FakeProvider(httpx)
    fake.script.append(httpx.Response(
        401, json={"error": {"type": "authentication_error",
                             "message": f"invalid x-api-key: {API_KEY}"}}))
    ledger = Ledger(blocker / "calls.db", fallback_dir=tmp_path / "fallback",
                    store_content=True)
    recorder = Recorder(ledger, tokenizer="bytes/4", store_content=True)
    client = anthropic_client(fake, recorder, max_retries=0)
    with pytest.warns(UserWarning, match="spill"):
        with pytest.raises(ProviderHTTPError) as raised:
            client.send(rendered_turns(1)[0])
        client.send(rendered_turns(1)[0])
    ledger.close()
    assert API_KEY not in str(raised.value) and API_KEY not in raised.value.body
    assert "[REDACTED]" in raised.value.body
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".spill.jsonl") for p in files)
    for path in files:
        assert API_KEY.encode() not in path.read_bytes(), path
    assert all(API_KEY not in r.model_dump_json() for r in recorder.records)
    assert API_KEY not in caplog.text


def test_a_key_without_a_known_shape_is_scrubbed_from_records_and_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A compatible server's key that matches no key pattern, echoed in a 401: the raised
    error, the record, the database and the logs never contain it."""
    key = "tenant42-secret-token-ABCDEF123456"
    caplog.set_level(logging.DEBUG)

    def handler(request: httpx.Request) -> httpx.Response:
        token = request.headers["authorization"].split()[-1]
        return httpx.Response(401, json={"error": f"invalid api token {token}"})

    with Ledger(tmp_path / "calls.db") as ledger:
        client = OpenAICompatibleClient("http://my-vllm:8000", api_key=key,
                                        recorder=Recorder(ledger, tokenizer="bytes/4"),
                                        transport=httpx.MockTransport(handler))
        with pytest.raises(ProviderHTTPError) as raised:
            client.send(chat_body(1))
        (record,) = ledger.records()
    assert key not in str(raised.value) and key not in raised.value.body
    assert record.verdict_detail["error_type"] == "invalid api token [REDACTED]"
    for path in tmp_path.rglob("*"):
        assert key.encode() not in path.read_bytes(), path
    assert key not in caplog.text


# ---------------------------------------------------------------------------- diagnostics


def test_anthropic_diagnostics_send_beta_and_the_lineage_previous_message_id() -> None:
    """diagnostics=True: beta header on every call; previous_message_id null on the first
    turn, then the previous response's id; the response's diagnostics land on the record."""
    fake = FakeProvider(httpx)
    fake.extra = {"diagnostics": {"cache_miss_reason": None}}
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_client(fake, recorder, diagnostics=True)
    requests = rendered_turns(2)
    for request in requests:
        client.send(request)
    sent = [json.loads(r.content) for r in fake.requests]
    assert [r.headers["anthropic-beta"] for r in fake.requests] == [DIAGNOSTICS_BETA] * 2
    assert sent[0]["diagnostics"] == {"previous_message_id": None}
    assert sent[1]["diagnostics"] == {"previous_message_id": "msg_0001"}
    assert fake.requests[1].content.startswith(requests[1].content[:-1])
    assert "diagnostics" not in requests[1].body
    second = recorder.records[1]
    assert second.verdict == "hit"
    assert second.diagnostics == {
        "provider": "anthropic",
        "requested": {"diagnostics": {"previous_message_id": "msg_0001"}},
        "response": {"cache_miss_reason": None},
        "our_comparison_response_id": "msg_0001",
    }


def test_openai_responses_diagnostics_compare_with_the_previous_response() -> None:
    """diagnostics=True on Responses adds prompt_cache_options.comparison_response_id from the
    second turn on (GPT-5.6+; an older model, which answers 400 to prompt_cache_options, gets
    none); the response's prompt_cache_diagnostics is stored."""
    fake = FakeProvider(httpx)
    fake.extra = {"prompt_cache_diagnostics": {"type": "cache_hit"}}
    recorder = Recorder(tokenizer="bytes/4")
    client = OpenAIClient(OPENAI_KEY, base_url="http://provider.test", recorder=recorder,
                          transport=httpx.MockTransport(fake), diagnostics=True)
    items: list[dict[str, Any]] = [{"role": "developer", "content": CHAT_SYSTEM},
                                   {"role": "user", "content": "q0"}]
    client.send({"model": "gpt-5.6", "input": items})
    items += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "q1"}]
    client.send({"model": "gpt-5.6", "input": items, "prompt_cache_options": {"ttl": "30m"}})
    first, second = (json.loads(r.content) for r in fake.requests)
    assert "prompt_cache_options" not in first
    assert second["prompt_cache_options"] == {"ttl": "30m", "comparison_response_id": "resp_0001"}
    assert recorder.records[1].diagnostics is not None
    assert recorder.records[1].diagnostics["response"] == {"type": "cache_hit"}
    client.send({"model": "gpt-4.1", "input": items})
    client.send({"model": "gpt-4.1", "input": [*items, {"role": "user", "content": "q2"}]})
    assert all("prompt_cache_options" not in json.loads(r.content) for r in fake.requests[2:])


# ---------------------------------------------------------------------------- compatible servers


def test_compatible_client_adds_the_tenant_cache_salt_and_records_the_provider() -> None:
    """cache_salt from configuration is appended to every body; the record says vllm."""
    fake = FakeProvider(httpx)
    salt = "t3n4nt-salt-Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eA"
    client = OpenAICompatibleClient("http://127.0.0.1:8000/v1", cache_salt=salt,
                                    transport=httpx.MockTransport(fake))
    body = chat_body(1)
    client.send(body)
    sent = fake.requests[0]
    assert sent.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert sent.content == wire_json(body)[:-1] + b',"cache_salt":"' + salt.encode() + b'"}'
    assert "authorization" not in sent.headers
    record = client.last_record
    assert record is not None
    assert (record.provider, record.wire_format) == ("vllm", "openai-compatible")
    with pytest.raises(InputError):
        client.send({**body, "cache_salt": "another-tenant"})
    with pytest.raises(InputError):
        OpenAICompatibleClient("http://127.0.0.1:8000", cache_salt="")


def test_compatible_client_reads_a_named_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """api_key_env names the variable; missing -> ConfigurationError naming it."""
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="DEEPSEEK_API_KEY"):
        OpenAICompatibleClient("http://127.0.0.1:1", api_key_env="DEEPSEEK_API_KEY",
                               provider="deepseek")
    monkeypatch.setenv("DEEPSEEK_API_KEY", OPENAI_KEY)
    fake = FakeProvider(httpx)
    client = OpenAICompatibleClient("http://127.0.0.1:1", api_key_env="DEEPSEEK_API_KEY",
                                    provider="deepseek", transport=httpx.MockTransport(fake))
    client.send(chat_body(1))
    assert fake.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert client.last_record is not None and client.last_record.wire_format == "deepseek"


# ---------------------------------------------------------------------------- async


def test_async_clients_send_stream_and_retry() -> None:
    """The async twins send, stream and retry like the sync clients."""
    fake = FakeProvider(httpx, is_async=True)
    fake.script.append(httpx.Response(429, headers={"retry-after-ms": "250"}))
    recorder = Recorder(tokenizer="bytes/4")
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def run() -> list[str]:
        client = AsyncAnthropicClient(API_KEY, base_url="http://provider.test",
                                      recorder=recorder, transport=httpx.MockTransport(fake),
                                      sleep=sleep)
        first, second = rendered_turns(2)
        answer = await client.send(first)
        stream = await client.send(second, stream=True)
        kinds = [event["type"] async for event in stream]
        await client.aclose()
        openai_client = AsyncOpenAIClient(OPENAI_KEY, base_url="http://provider.test",
                                          recorder=recorder,
                                          transport=httpx.MockTransport(fake))
        chat = await openai_client.send(chat_body(1))
        await openai_client.aclose()
        return [answer["id"], kinds[-1], chat["id"]]

    assert asyncio.run(run()) == ["msg_0001", "message_stop", "chatcmpl-0003"]
    assert slept == [0.25]
    assert [r.verdict for r in recorder.records] == ["unknown", "cold", "hit", "cold"]
    assert recorder.records[2].ttft_ms is not None


def test_retry_after_parsing() -> None:
    """retry-after-ms wins over retry-after; seconds and HTTP dates are understood."""
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_s({"retry-after": "3"}) == 3.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"},
                         now=1445412480.0) == 10.0
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None
