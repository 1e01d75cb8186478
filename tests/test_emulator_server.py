"""The emulator's HTTP layer: error shapes on garbage input, headers, inspection, lifecycle."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stableprompt import ConfigurationError, InputError
from stableprompt.emulator import AssistantTurn, Emulator, FakeClock

ENDPOINTS = ("/v1/messages", "/v1/chat/completions", "/v1/responses")
LONG = " ".join(f"rule {i}: keep the prefix stable." for i in range(300))


@pytest.fixture(scope="module")
def shared() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


def post(emu: Emulator, path: str, body: bytes, headers: dict[str, str] | None = None,
         method: str = "POST") -> tuple[int, dict[str, str], Any]:
    """Send one raw request on a fresh connection; return (status, headers, JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json",
                                                       **(headers or {})})
        response = conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(
            data)
    finally:
        conn.close()


def anthropic_body(**extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 16,
            "messages": [{"role": "user", "content": "hi"}], **extra}


def assert_anthropic_error(body: Any, kind: str = "invalid_request_error") -> None:
    assert body["type"] == "error" and body["error"]["type"] == kind
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def assert_openai_error(body: Any, kind: str = "invalid_request_error") -> None:
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == kind and body["error"]["message"]


def test_every_response_says_it_is_an_emulator(shared: Emulator) -> None:
    """Success and error answers both carry x-stableprompt-emulator: 1."""
    status, headers, body = post(shared, "/v1/messages", json.dumps(anthropic_body()).encode())
    assert status == 200 and headers["x-stableprompt-emulator"] == "1"
    assert headers["request-id"].startswith("req_emu_")
    assert body["content"] == [{"type": "text", "text": "hi"}]
    status, headers, _ = post(shared, "/nope", b"{}")
    assert status == 404 and headers["x-stableprompt-emulator"] == "1"


@pytest.mark.parametrize("raw", [b"", b"not json", b"[]", b"{", b"\xff\xfe", b"null",
                                 b"[" * 5000, b'{"model": 1}', b'{"model": "m"}'])
@pytest.mark.parametrize("path", ENDPOINTS)
def test_garbage_bodies_get_a_400_in_the_provider_shape(
    shared: Emulator, path: str, raw: bytes
) -> None:
    """Undecodable or wrongly typed bodies are 400s in the endpoint's error shape."""
    status, _, body = post(shared, path, raw)
    assert status == 400
    if path == "/v1/messages":
        assert_anthropic_error(body)
    else:
        assert_openai_error(body)


def test_missing_and_wrong_fields_name_the_field(shared: Emulator) -> None:
    """Required fields and types are checked with a message that names the field."""
    cases = [
        ("/v1/messages", {"model": "m", "messages": []}, "max_tokens: Field required"),
        ("/v1/messages", anthropic_body(max_tokens="9"), "max_tokens: expected an integer"),
        ("/v1/messages", anthropic_body(messages="hi"), "messages: expected an array"),
        ("/v1/chat/completions", {"model": "gpt-4.1"}, "Missing required parameter"),
        ("/v1/chat/completions", {"messages": []}, "you must provide a model"),
        ("/v1/responses", {"model": "gpt-4.1", "input": 3}, "input: expected an array"),
    ]
    for path, payload, needle in cases:
        status, _, body = post(shared, path, json.dumps(payload).encode())
        message = body["error"]["message"]
        assert status == 400 and needle in message, (path, message)


def test_unknown_paths_and_methods(shared: Emulator) -> None:
    """Unknown paths are 404 and non-POST methods 405, each in the guessed provider's shape."""
    status, _, body = post(shared, "/v1/embeddings", b"{}")
    assert status == 404
    assert_openai_error(body)
    status, _, body = post(shared, "/v1/complete", b"{}", {"anthropic-version": "2023-06-01"})
    assert status == 404
    assert_anthropic_error(body, "not_found_error")
    status, _, body = post(shared, "/v1/messages", b"", method="GET")
    assert status == 405 and "use POST" in body["error"]["message"]
    status, _, body = post(shared, "/v1/chat/completions", b"{}", method="DELETE")
    assert status == 405
    assert_openai_error(body)


def test_oversized_and_chunked_bodies() -> None:
    """Bodies over the limit get a 413; chunked bodies a 411; the server keeps serving."""
    with Emulator(max_body_bytes=100) as emu:
        status, _, body = post(emu, "/v1/messages", b"x" * 101)
        assert status == 413
        assert_anthropic_error(body, "request_too_large")
        conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
        conn.putrequest("POST", "/v1/chat/completions")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        conn.send(b"2\r\n{}\r\n0\r\n\r\n")
        response = conn.getresponse()
        assert response.status == 411
        assert_openai_error(json.loads(response.read()))
        conn.close()
        assert post(emu, "/healthz", b"", method="GET")[2]["real_provider"] is False


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["model", "messages", "input", "max_tokens", "role",
                                       "content", "type", "text", "tools", "system",
                                       "stream", "cache_control", "x"]), inner, max_size=5),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(payload=JSON, path=st.sampled_from(ENDPOINTS))
def test_fuzzed_bodies_never_crash_the_server(shared: Emulator, payload: Any, path: str) -> None:
    """Arbitrary JSON gets a 200 or a 4xx in the provider's shape, never a 500."""
    raw = json.dumps(payload).encode()
    status, _, body = post(shared, path, raw)
    assert status in (200, 400), body
    if status == 400:
        (assert_anthropic_error if path == "/v1/messages" else assert_openai_error)(body)


def test_responder_failures_are_500s_and_the_server_survives() -> None:
    """A raising responder yields a 500 in the provider shape; later requests still work."""
    calls = []

    def flaky(body: Any) -> AssistantTurn:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("script bug")
        return AssistantTurn(text="fine")

    with Emulator(responder=flaky) as emu:
        status, _, body = post(emu, "/v1/messages", json.dumps(anthropic_body()).encode())
        assert status == 500
        assert_anthropic_error(body, "api_error")
        assert "RuntimeError: script bug" in body["error"]["message"]
        status, _, body = post(emu, "/v1/messages", json.dumps(anthropic_body()).encode())
        assert status == 200 and body["content"][0]["text"] == "fine"
        assert [r.status for r in emu.requests()] == [500, 200]
        assert emu.stats().errors == 1


def test_stats_and_request_log_add_up() -> None:
    """stats() totals equal the sum of the logged usages, with store counters."""
    body = anthropic_body(system=[{"type": "text", "text": LONG,
                                   "cache_control": {"type": "ephemeral"}}])
    with Emulator(clock=FakeClock()) as emu:
        for _ in range(3):
            assert post(emu, "/v1/messages", json.dumps(body).encode())[0] == 200
        post(emu, "/v1/messages", b"junk")
        records = emu.requests()
        stats = emu.stats()
        over_http = post(emu, "/stableprompt/stats", b"", method="GET")[2]
    ok = [r for r in records if r.status == 200]
    assert len(records) == 4 and len(ok) == 3 and records[-1].error_type == (
        "invalid_request_error")
    assert ok[0].cache_write_tokens == ok[1].cache_read_tokens == ok[2].cache_read_tokens
    assert (ok[0].cache_write_tokens or 0) > 1024
    assert stats.requests == 4 and stats.errors == 1
    assert stats.input_tokens_total == sum(r.input_tokens_total or 0 for r in ok)
    assert stats.cache_read_tokens == 2 * (ok[0].cache_write_tokens or 0)
    assert (stats.store.entries, stats.store.writes, stats.store.reads) == (1, 1, 2)
    assert stats.tokenizer_cache_hits > 0
    assert over_http["requests"] == 4 and over_http["emulator"] == "stableprompt"


def test_lru_capacity_evicts_the_oldest_entry() -> None:
    """With room for one entry, a second prefix evicts the first, which then misses."""
    def body(tag: str) -> bytes:
        return json.dumps(anthropic_body(system=[{"type": "text", "text": tag + LONG,
                                                  "cache_control": {"type": "ephemeral"}}]
                                         )).encode()

    with Emulator(capacity_entries=1) as emu:
        post(emu, "/v1/messages", body("a"))
        post(emu, "/v1/messages", body("b"))
        usage = post(emu, "/v1/messages", body("a"))[2]["usage"]
        assert usage["cache_read_input_tokens"] == 0 and usage["cache_creation_input_tokens"] > 0
        assert emu.stats().store.evictions == 2


def test_construction_errors() -> None:
    """Non-loopback hosts, bad ports and advance() without a FakeClock are refused."""
    with pytest.raises(InputError, match="loopback"):
        Emulator(host="0.0.0.0")
    with pytest.raises(InputError, match="port"):
        Emulator(port=70000)
    with pytest.raises(ConfigurationError, match="FakeClock") as info:
        Emulator().advance(1)
    assert info.value.code == "emulator-clock"


def test_close_releases_the_port() -> None:
    """After the with-block the port is free and can be bound again."""
    with Emulator() as first:
        port = first.port
        assert first.base_url == f"http://127.0.0.1:{port}"
        assert first.openai_base_url.endswith("/v1")
    with Emulator(port=port) as second:
        assert post(second, "/healthz", b"", method="GET")[0] == 200
