"""Tests for how calls fail (``_recording/_errors``): the complete httpx/httpx2 mapping,
failures inside 2xx answers, secrets scrubbed from every stored text, and the usage evidence
kept when parsing fails."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from stableprompt import (
    Ledger,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
)
from stableprompt._recording._errors import error_class_of, map_transport_error
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._transport import RecordingTransport
from test_transport import SYSTEM_BLOCKS, FakeProvider, anthropic_sdk, conversation, openai_sdk


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_every_transport_exception_maps_to_the_most_specific_provider_error(
    module: Any,
) -> None:
    """Every RequestError class httpx/httpx2 defines maps, in the client and in the record
    alike, to ProviderTimeoutError (timeouts) or ProviderConnectionError (all others), and no
    other HTTPError class is left unaccounted for."""
    classes = {obj for obj in vars(module).values()
               if isinstance(obj, type) and issubclass(obj, module.HTTPError)}
    transport = {cls for cls in classes if issubclass(cls, module.RequestError)}
    assert classes - transport == {module.HTTPError, module.HTTPStatusError}
    assert len(transport) >= 15
    for cls in transport:
        expected: type[ProviderError] = (
            ProviderTimeoutError if issubclass(cls, module.TimeoutException)
            else ProviderConnectionError)
        exc = cls("boom")
        mapped = map_transport_error(exc)
        assert type(mapped) is expected, cls
        assert f"({cls.__name__}: boom)" in str(mapped)
        assert error_class_of(exc) == expected.__name__, cls


# Not key-shaped (no sk-/AIza prefix): only the request's own header value can find it.
TENANT_KEY = "tenant42-secret-token-ABCDEF123456"


def _sse(*events: tuple[str | None, Any]) -> bytes:
    text = ""
    for name, data in events:
        if name:
            text += f"event: {name}\n"
        text += f"data: {json.dumps(data)}\n\n"
    return text.encode()


def _stream(body: bytes) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                           content=iter([body]))


ANTHROPIC_ERROR = _sse(
    ("message_start", {"type": "message_start", "message": {
        "id": "msg_err", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [], "usage": {"input_tokens": 5, "cache_read_input_tokens": 3000,
                                 "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "Hel"}}),
    ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
)
RESPONSES_FAILED = _sse(
    ("response.created", {"type": "response.created",
                          "response": {"id": "resp_err", "model": "gpt-4.1", "usage": None}}),
    ("response.failed", {"type": "response.failed", "response": {
        "id": "resp_err", "model": "gpt-4.1", "status": "failed",
        "error": {"code": "server_error", "message": "boom"},
        "usage": {"input_tokens": 3000, "input_tokens_details": {"cached_tokens": 2944},
                  "output_tokens": 0, "total_tokens": 3000}}}),
)
CHAT_ERROR = (b'data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4.1","choices":'
              b'[{"index":0,"delta":{"content":"hi"}}]}\n\n'
              b'data: {"error":{"message":"upstream died","type":"server_error"}}\n\n')


@pytest.mark.parametrize(("api", "body", "error_type"), [
    ("anthropic", ANTHROPIC_ERROR, "overloaded_error"),
    ("responses", RESPONSES_FAILED, "server_error"),
    ("chat", CHAT_ERROR, "upstream died"),
])
def test_an_error_inside_a_stream_is_a_failed_call_and_never_a_predecessor(
    api: str, body: bytes, error_type: str
) -> None:
    """An Anthropic error event, a Responses response.failed and a chat chunk with an error,
    all in 200 streams: ProviderError with the provider's error type, verdict unknown, the
    usage seen kept; the same request sent again afterwards is cold, not compared with it."""
    fake = FakeProvider()
    fake.script.append(_stream(body))
    recorder = Recorder(tokenizer="bytes/4")
    history: Any = [{"role": "user", "content": "hi " * 3000}]
    try:
        if api == "anthropic":
            client: Any = anthropic_sdk(fake, recorder)
            kwargs: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 5,
                                      "system": SYSTEM_BLOCKS, "messages": conversation(1)}
            list(client.messages.create(stream=True, **kwargs))
        elif api == "responses":
            client = openai_sdk(fake, recorder)
            kwargs = {"model": "gpt-4.1", "input": history}
            list(client.responses.create(stream=True, **kwargs))
        else:
            client = openai_sdk(fake, recorder)
            kwargs = {"model": "gpt-4.1", "messages": history}
            list(client.chat.completions.create(stream=True, **kwargs))
    except (anthropic.APIError, openai.APIError):
        pass  # the SDKs raise on some of these: the record is what is checked
    if api == "anthropic":
        client.messages.create(**kwargs)
    elif api == "responses":
        client.responses.create(**kwargs)
    else:
        client.chat.completions.create(**kwargs)
    failed, again = recorder.records
    assert (failed.status_code, failed.error_class) == (200, "ProviderError")
    assert failed.verdict == "unknown"
    assert failed.verdict_detail["error_type"] == error_type
    assert failed.verdict_detail["error_code"] == "provider-stream-error"
    assert "failed" in str(failed.verdict_detail["unknown_reason"])
    if api != "chat":
        assert failed.cache_read_tokens in (3000, 2944)
    assert again.error_class is None and again.predecessor_id is None
    assert again.verdict in ("cold", "below_minimum")


def test_html_and_error_bodies_in_200_answers_are_failed_calls() -> None:
    """A 200 HTML page (a proxy login) and a 200 JSON error object: ProviderError with
    provider-invalid-json / provider-error-body, verdict unknown, never a predecessor."""
    fake = FakeProvider(httpx)
    fake.script += [
        httpx.Response(200, headers={"content-type": "text/html"},
                       text="<html><body>proxy login</body></html>"),
        httpx.Response(200, json={"error": {"type": "invalid_request_error", "message": "x"}}),
    ]
    recorder = Recorder(tokenizer="bytes/4")
    body = {"model": "claude-sonnet-4-6", "max_tokens": 5, "system": SYSTEM_BLOCKS,
            "messages": conversation(1)}
    with httpx.Client(transport=RecordingTransport(httpx.MockTransport(fake),
                                                   recorder=recorder)) as client:
        for _ in range(3):
            client.post("http://provider.test/v1/messages", json=body)
    html, error_body, ok = recorder.records
    assert (html.error_class, html.verdict_detail["error_code"]) == (
        "ProviderError", "provider-invalid-json")
    assert (error_body.error_class, error_body.verdict_detail["error_code"]) == (
        "ProviderError", "provider-error-body")
    assert error_body.verdict_detail["error_type"] == "invalid_request_error"
    assert {html.verdict, error_body.verdict} == {"unknown"}
    assert ok.error_class is None and ok.verdict == "cold" and ok.predecessor_id is None


def test_usage_evidence_is_kept_when_it_cannot_be_parsed_or_does_not_add_up() -> None:
    """A usage object with a negative count is kept as usage_raw beside the parse error; an
    inconsistent one (TTL split != write) states why in verdict_detail."""
    def message(usage: dict[str, Any]) -> httpx.Response:
        return httpx.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [], "usage": usage})

    negative = {"input_tokens": -5, "cache_read_input_tokens": 10,
                "cache_creation_input_tokens": 0, "output_tokens": 3}
    split = {"input_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 100,
             "cache_creation": {"ephemeral_5m_input_tokens": 100,
                                "ephemeral_1h_input_tokens": 100}, "output_tokens": 3}
    fake = FakeProvider(httpx)
    fake.script += [message(negative), message(split)]
    recorder = Recorder(tokenizer="bytes/4")
    with httpx.Client(transport=RecordingTransport(httpx.MockTransport(fake),
                                                   recorder=recorder)) as client:
        for _ in range(2):
            client.post("http://provider.test/v1/messages", json={
                "model": "claude-sonnet-4-6", "max_tokens": 5,
                "messages": [{"role": "user", "content": "hi"}]})
    bad, odd = recorder.records
    assert bad.usage_raw == negative
    assert str(bad.verdict_detail["usage_error"]).startswith("usage-negative")
    assert odd.usage_inconsistent is True
    assert odd.verdict_detail["usage_inconsistency"] == (
        "TTL split 5m + 1h (200) does not match cache_write (100)")


def test_a_key_echoed_by_the_server_reaches_no_record_file_or_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A key with no recognizable shape, echoed whole in a 401 and in part in a 500 body,
    under the official openai SDK: it is in no record, database, spill file or log line,
    while ordinary text around it survives."""
    caplog.set_level(logging.DEBUG)

    def handler(request: httpx2.Request) -> httpx2.Response:
        token = request.headers["authorization"].split()[-1]
        if "retry" in request.url.path:
            return httpx2.Response(500, json={"error": f"bad token {token[:20]}... (truncated)"})
        return httpx2.Response(401, json={"error": f"invalid api token {token}"})

    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    good = Ledger(tmp_path / "ok" / "calls.db")
    spilling = Ledger(blocker / "calls.db", fallback_dir=tmp_path / "fallback")
    records = []
    for ledger in (good, spilling):
        recorder = Recorder(ledger, tokenizer="bytes/4")
        client = openai.OpenAI(
            api_key=TENANT_KEY, base_url="http://my-vllm:8000/v1", max_retries=0,
            http_client=httpx2.Client(transport=RecordingTransport(
                httpx2.MockTransport(handler), recorder=recorder)))
        for prefix in ("", "/retry"):  # the LedgerSpillWarning (an error here) is contained
            with pytest.raises(openai.APIStatusError):
                client.with_options(base_url=f"http://my-vllm:8000/v1{prefix}").chat \
                    .completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        records += recorder.records
    good.close()
    spilling.close()
    assert records[0].verdict_detail["error_type"] == "invalid api token [REDACTED]"
    assert records[1].verdict_detail["error_type"] == "bad token [REDACTED]... (truncated)"
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".spill.jsonl") for p in files)
    for path in files:
        data = path.read_bytes()
        assert TENANT_KEY.encode() not in data and TENANT_KEY[:20].encode() not in data, path
    assert all(TENANT_KEY[:12] not in r.model_dump_json() for r in records)
    assert TENANT_KEY[:12] not in caplog.text


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_a_connection_error_names_the_request_without_its_secrets(module: Any) -> None:
    """A refused connection says which request failed (method, scheme, host, port, path); the
    URL's user info and query string (Gemini's ``?key=``) are left out."""
    url = "http://user:hunter2@127.0.0.1:1/v1/messages?key=tenant42-secret"
    with pytest.raises(module.HTTPError) as caught:
        module.post(url, json={}, timeout=5.0)
    message = str(map_transport_error(caught.value))
    assert message.startswith("connection to the provider failed: POST "
                              "http://127.0.0.1:1/v1/messages (ConnectError: ")
    assert "hunter2" not in message and "tenant42" not in message and "key=" not in message
    ipv6 = module.Request("GET", "http://[::1]:8080/health")
    assert "GET http://[::1]:8080/health (" in str(
        map_transport_error(module.ConnectError("refused", request=ipv6)))
    assert str(map_transport_error(module.ConnectError("no request"))).startswith(
        "connection to the provider failed (ConnectError: no request)")
