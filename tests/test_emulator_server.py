"""The emulator's HTTP layer: error shapes on garbage input, headers, inspection, lifecycle."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stableprompt import ConfigurationError, InputError
from stableprompt.emulator import AssistantTurn, Emulator, FakeClock
from stableprompt.emulator._checks import MAX_OUTPUT_TOKENS
from stableprompt.emulator._http import MAX_BODY_BYTES

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


def raw_exchange(emu: Emulator, data: bytes, *, shut_write: bool = False
                 ) -> tuple[int, dict[str, str], bytes]:
    """Write raw bytes on a fresh connection, read until the server closes it; return
    (status, lower-cased headers, body bytes)."""
    with socket.create_connection(("127.0.0.1", emu.port), timeout=10) as sock:
        sock.sendall(data)
        if shut_write:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *lines = head.decode("iso-8859-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return int(status_line.split()[1]), headers, body


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


def test_default_body_limit_is_anthropics_32_mb() -> None:
    """A Content-Length one byte over 32 MiB is a 413 request_too_large, decided from the
    header alone (the client sends no body and closes its side)."""
    assert MAX_BODY_BYTES == 32 * 1024 * 1024
    with Emulator() as emu:
        status, headers, raw = raw_exchange(
            emu, b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1), shut_write=True)
        assert status == 413 and headers["content-type"].startswith("application/json")
        body = json.loads(raw)
        assert_anthropic_error(body, "request_too_large")
        assert str(MAX_BODY_BYTES) in body["error"]["message"]
        assert emu.requests()[-1].status == 413


def test_an_oversized_body_sent_in_full_still_gets_its_413() -> None:
    """A client that writes a whole 8 MB body before reading gets the 413, not a reset."""
    with Emulator(max_body_bytes=1000) as emu:
        status, _, body = post(emu, "/v1/chat/completions", b"x" * (8 * 1024 * 1024))
        assert status == 413
        assert_openai_error(body)
        assert post(emu, "/healthz", b"", method="GET")[0] == 200


def test_a_whitespace_free_body_is_answered_with_piecewise_counts() -> None:
    """A 1 MB message without whitespace (the case tiktoken handles superlinearly) is answered,
    its tokens counted in 4,096-char pieces."""
    text = "x" * 1_000_000
    with Emulator() as emu:
        status, _, body = post(emu, "/v1/messages", json.dumps(anthropic_body(
            max_tokens=5, messages=[{"role": "user", "content": text}])).encode())
    assert status == 200
    assert body["content"][0]["text"] == "x" * 40 and body["stop_reason"] == "max_tokens"
    # 244 pieces of 4,096 'x' (512 tokens each) and a 576-char tail, plus the role and quotes.
    assert 125_000 <= body["usage"]["input_tokens"] <= 125_010


def test_a_hundred_concurrent_connections_all_succeed() -> None:
    """100 clients connecting at the same instant all get a 200 (the listen backlog is large
    enough that none is reset)."""
    payload = json.dumps(anthropic_body()).encode()
    results: list[object] = []
    lock = threading.Lock()
    with Emulator() as emu:
        barrier = threading.Barrier(100)

        def one() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=30)
            barrier.wait()
            try:
                conn.request("POST", "/v1/messages", body=payload,
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                outcome: object = (response.status, json.loads(response.read())["content"])
            except OSError as exc:
                outcome = type(exc).__name__
            finally:
                conn.close()
            with lock:
                results.append(outcome)

        threads = [threading.Thread(target=one) for _ in range(100)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert Counter(map(repr, results)) == {repr((200, [{"type": "text", "text": "hi"}])): 100}
        assert emu.stats().requests == 100


@pytest.mark.parametrize(("raw", "status", "flavor"), [
    (b"GARBAGE\r\n\r\n", 400, "openai"),
    (b"GET / HTTP/1.1 extra words\r\n\r\n", 400, "openai"),
    (b"GET / HTTP/x.y\r\n\r\n", 400, "openai"),
    (b"GET / HTTP/2.0\r\n\r\n", 505, "openai"),
    (b"POST /v1/messages HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431, "anthropic"),
    (b"POST /v1/messages?q=" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "openai"),
    (b"FOO /v1/messages HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 405, "anthropic"),
    (b"TRACE /v1/responses HTTP/1.1\r\n\r\n", 405, "openai"),
    (b"BREW /coffee HTTP/1.1\r\nanthropic-version: 2023-06-01\r\n\r\n", 404, "anthropic"),
    (b"OPTIONS /v1/chat/completions HTTP/1.1\r\nConnection: close\r\n\r\n", 405, "openai"),
    (b"GET http://[::1 HTTP/1.1\r\nConnection: close\r\n\r\n", 404, "openai"),
    (b"POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n",
     411, "anthropic"),
])
def test_unparsable_requests_and_odd_methods_get_json_errors(
    raw: bytes, status: int, flavor: str
) -> None:
    """Garbage request lines, bad versions, huge header lines, unknown methods, unparsable
    targets and ambiguous framing are answered in the provider's JSON error shape, never the
    stdlib's HTML page or a dropped connection."""
    with Emulator() as emu:
        got, headers, body = raw_exchange(emu, raw)
        assert got == status
        assert headers["content-type"].startswith("application/json")
        assert headers["x-stableprompt-emulator"] == "1"
        (assert_anthropic_error if flavor == "anthropic" else assert_openai_error)(
            json.loads(body), "not_found_error" if flavor == "anthropic" and status == 404
            else "invalid_request_error")
        if status == 405:
            assert headers["allow"] == "POST"
        assert emu.requests()[-1].status == status
        assert post(emu, "/healthz", b"", method="GET")[0] == 200


def test_head_requests_get_headers_only() -> None:
    """HEAD on an endpoint is a 405 and HEAD /healthz a 200, both JSON-typed, without a body,
    and the kept-alive connection stays usable."""
    with Emulator() as emu:
        conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
        try:
            conn.request("HEAD", "/v1/messages")
            response = conn.getresponse()
            assert response.status == 405 and response.read() == b""
            assert response.getheader("content-type", "").startswith("application/json")
            assert int(response.getheader("content-length", "0")) > 0
            conn.request("HEAD", "/healthz")
            response = conn.getresponse()
            assert response.status == 200 and response.read() == b""
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            assert json.loads(response.read())["real_provider"] is False
        finally:
            conn.close()


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_body_cut_short_is_an_incomplete_body_400(path: str) -> None:
    """A body that ends before its Content-Length (the client closes its side) is a 400 naming
    the incomplete body, not parsed as complete."""
    full = json.dumps(anthropic_body()).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(full)}\r\n\r\n").encode()
    with Emulator() as emu:
        status, _, raw = raw_exchange(emu, head + full[:10], shut_write=True)
        body = json.loads(raw)
        assert status == 400
        (assert_anthropic_error if path == "/v1/messages" else assert_openai_error)(body)
        assert f"got 10 of the {len(full)} bytes" in body["error"]["message"]
        assert post(emu, path, full)[0] in (200, 400)  # still serving


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "application/jsonx"])
@pytest.mark.parametrize("path", ENDPOINTS)
def test_bodies_must_be_declared_json(path: str, content_type: str | None) -> None:
    """A POST without Content-Type: application/json is a 400 in the provider's shape."""
    payload = json.dumps(anthropic_body()).encode()
    with Emulator() as emu:
        conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
        try:
            conn.putrequest("POST", path)
            if content_type is not None:
                conn.putheader("Content-Type", content_type)
            conn.putheader("Content-Length", str(len(payload)))
            conn.endheaders(payload)
            response = conn.getresponse()
            status, body = response.status, json.loads(response.read())
        finally:
            conn.close()
    assert status == 400
    (assert_anthropic_error if path == "/v1/messages" else assert_openai_error)(body)
    assert "Content-Type: application/json" in body["error"]["message"]


def test_json_content_type_parameters_are_accepted(shared: Emulator) -> None:
    """application/json with a charset parameter, in any case, is JSON."""
    status, _, _ = post(shared, "/v1/messages", json.dumps(anthropic_body()).encode(),
                        {"Content-Type": "Application/JSON; charset=utf-8"})
    assert status == 200


@pytest.mark.parametrize(("path", "field", "extra"), [
    ("/v1/messages", "max_tokens", {}),
    ("/v1/chat/completions", "max_tokens", {}),
    ("/v1/chat/completions", "max_completion_tokens", {}),
    ("/v1/responses", "max_output_tokens", {"input": "hi"}),
])
def test_output_limits_must_be_integers_within_the_emulator_maximum(
    shared: Emulator, path: str, field: str, extra: dict[str, Any]
) -> None:
    """1e9 (a float) is rejected as not an integer, 10**9 as above the 128,000-token emulator
    maximum; 128,000 itself is accepted."""
    model = "claude-sonnet-4-6" if path == "/v1/messages" else "gpt-5.2"
    base: dict[str, Any] = {"model": model, **extra}
    if path != "/v1/responses":
        base["messages"] = [{"role": "user", "content": "hi"}]
    if path == "/v1/messages":
        base["max_tokens"] = 16

    def send(value: str) -> tuple[int, Any]:
        raw = json.dumps({**base, field: "VALUE"}).encode().replace(b'"VALUE"', value.encode())
        status, _, body = post(shared, path, raw)
        return status, body

    status, body = send("1e9")
    assert status == 400 and f"{field}: expected an integer, got number" in (
        body["error"]["message"])
    status, body = send("16.0")
    assert status == 400 and "expected an integer" in body["error"]["message"]
    status, body = send(str(10**9))
    assert status == 400 and str(MAX_OUTPUT_TOKENS) in body["error"]["message"]
    if path == "/v1/messages":
        assert_anthropic_error(body)
        assert "maximum allowed number of output tokens for claude-sonnet-4-6" in (
            body["error"]["message"])
    else:
        assert_openai_error(body)
        assert body["error"]["param"] == field and body["error"]["code"] == "invalid_value"
    assert send(str(MAX_OUTPUT_TOKENS))[0] == 200


def test_oversized_body_gets_413_without_waiting_for_the_body(shared: Emulator) -> None:
    """A Content-Length beyond the limit is answered 413 as soon as the client stops sending,
    not after the 60 s idle timeout."""
    with socket.create_connection(("127.0.0.1", shared.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 2000000000\r\n\r\n{}")
        first = sock.recv(64)  # raises TimeoutError (a failure) if the server waits 60 s
    assert first.startswith(b"HTTP/1.1 413")


@pytest.mark.parametrize(
    "body",
    [{"model": "gpt-4.1", "messages": [{"role": "user", "content": None}]},
     {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": 5}]},
     {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"description": "no name"}}]}],
)
def test_chat_rejects_malformed_messages_and_tools(shared: Emulator, body: dict[str, Any]
                                                   ) -> None:
    """Chat Completions rejects null user content and malformed tools with a 400, like the
    Anthropic and Responses endpoints do."""
    status, _, answer = post(shared, "/v1/chat/completions", json.dumps(body).encode())
    assert status == 400
    assert_openai_error(answer)


@pytest.mark.parametrize("bad", [["1h"], {"ttl": "1h"}, 5, None])
def test_ttl_and_retention_of_the_wrong_type_are_provider_400s(shared: Emulator,
                                                              bad: Any) -> None:
    """A list/dict/number as ``cache_control.ttl``, ``prompt_cache_retention`` or
    ``prompt_cache_breakpoint.ttl`` is a 400 in the provider's shape naming the field, never a
    500 (issue 9 #16)."""
    block = {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": bad}}
    status, _, body = post(shared, "/v1/messages", json.dumps(anthropic_body(
        messages=[{"role": "user", "content": [block]}])).encode())
    assert status == 400 and "ttl" in body["error"]["message"]
    assert_anthropic_error(body)
    if bad is None:
        return  # an explicit null retention means "not set" for OpenAI
    for path, request in (
        ("/v1/responses", {"model": "gpt-5.6", "input": "hi", "prompt_cache_retention": bad}),
        ("/v1/chat/completions", {"model": "gpt-5.6", "prompt_cache_retention": bad,
                                  "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/chat/completions", {"model": "gpt-5.6", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "hi",
             "prompt_cache_breakpoint": {"mode": "explicit", "ttl": bad}}]}]}),
    ):
        status, _, body = post(shared, path, json.dumps(request).encode())
        assert status == 400, (path, body)
        assert_openai_error(body)
