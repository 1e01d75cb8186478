"""The recording proxy: official SDKs through it to the emulator, byte identity, ledger rows,
and its answers to bad input (``stableprompt._proxy``)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from stableprompt import Ledger, Recorder, RecordingTransport
from stableprompt._lint._capture import read_capture
from stableprompt._proxy._server import Proxy, bind
from stableprompt.emulator import Emulator, FakeClock

A_MODEL = "claude-sonnet-4-6"
O_MODEL = "gpt-5.6"
A_KEY = "sk-ant-api03-proxytestkey-0123456789abcdef"
O_KEY = "sk-proj-proxytestkey-0123456789abcdef"
TOKEN = "proxy-token-0123456789"
SYSTEM = " ".join(f"rule {i}: keep the prefix stable." for i in range(150))
TOOLS = [{"name": name, "description": f"{name} things",
          "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
         for name in ("alpha", "beta", "gamma")]


def a_body(question: str = "hi", tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": A_MODEL, "max_tokens": 32,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": question}]}
    if tools is not None:
        body["tools"] = tools
    return body


def o_messages(question: str = "hi") -> Any:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "proxy.db") as led:
        yield led


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


@pytest.fixture
def proxy(emu: Emulator, ledger: Ledger) -> Iterator[Proxy]:
    with Proxy(emu.base_url, recorder=Recorder(ledger)) as p:
        yield p


def rows(recorder: Recorder) -> list[tuple[Any, ...]]:
    """What a ledger row says about a call, without its ids and times."""
    # gap_s: the wall-clock gap between calls; stream: the SDK closes a stream at [DONE]
    # before its body ends (noted by the direct transport), the proxy reads the body to its end
    detail_skip = {"gap_s", "stream"}
    return [(r.wire_format, r.verdict, r.input_tokens_total, r.cache_read_tokens,
             r.cache_write_tokens, r.output_tokens, r.lcp_bytes, r.predicted_cache_read_tokens,
             r.status_code, r.error_class,
             {k: v for k, v in r.verdict_detail.items() if k not in detail_skip})
            for r in recorder.records]


def test_anthropic_sdk_through_the_proxy_matches_a_direct_recorded_call() -> None:
    """Sync, streaming and a tool reorder through the proxy give the bytes a direct call gets
    and the ledger rows RecordingTransport writes for the same calls."""
    calls = [a_body(tools=TOOLS), a_body(tools=TOOLS), a_body("again", TOOLS[::-1])]
    with Emulator(clock=FakeClock()) as direct_emu, Emulator(clock=FakeClock()) as proxied_emu:
        direct = Recorder()
        via = Recorder()
        session = {"x-stableprompt-session": "s-1"}
        with anthropic.Anthropic(
                base_url=direct_emu.base_url, api_key=A_KEY, max_retries=0,
                default_headers=session,
                http_client=httpx2.Client(transport=RecordingTransport(recorder=direct))) as d, \
                Proxy(proxied_emu.base_url, recorder=via) as proxy, \
                anthropic.Anthropic(base_url=proxy.base_url, api_key=A_KEY, max_retries=0,
                                    default_headers=session) as p:
            for body in calls:
                one = d.messages.with_raw_response.create(**body)
                two = p.messages.with_raw_response.create(**body)
                assert one.http_response.content == two.http_response.content
                assert one.http_response.headers["content-type"] == \
                    two.http_response.headers["content-type"]
            with d.messages.stream(**a_body(tools=TOOLS)) as s1, \
                    p.messages.stream(**a_body(tools=TOOLS)) as s2:
                events1 = [e.model_dump() for e in s1]
                events2 = [e.model_dump() for e in s2]
            assert events1 == events2
    assert rows(via) == rows(direct)
    verdicts = [r.verdict for r in via.records]
    assert verdicts[:2] == ["cold", "hit"] and verdicts[3] == "hit"
    assert via.records[2].verdict == "client_mutation"
    assert via.records[2].verdict_detail["cause"] == "tool-reorder"
    assert via.records[1].cache_read_tokens == via.records[0].cache_write_tokens
    assert (via.records[1].cache_read_tokens or 0) > 1024
    assert via.records[3].ttft_ms is not None


def _openai_call(client: openai.OpenAI, api: str, stream: bool) -> Any:
    """One call; the raw body bytes, or the parsed stream events."""
    if api == "chat":
        if stream:
            return [c.model_dump() for c in client.chat.completions.create(
                model=O_MODEL, messages=o_messages(), stream=True,
                stream_options={"include_usage": True})]
        return client.chat.completions.with_raw_response.create(
            model=O_MODEL, messages=o_messages()).http_response.content
    if stream:
        return [e.model_dump() for e in client.responses.create(
            model=O_MODEL, instructions=SYSTEM, input="hi", stream=True)]
    return client.responses.with_raw_response.create(
        model=O_MODEL, instructions=SYSTEM, input="hi").http_response.content


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_sdk_sync_and_stream_through_the_proxy(api: str) -> None:
    """OpenAI Chat Completions and Responses (plain and streamed) through the proxy: bodies
    identical to direct calls, rows identical to RecordingTransport's."""
    with Emulator(clock=FakeClock()) as direct_emu, Emulator(clock=FakeClock()) as proxied_emu:
        direct, via = Recorder(), Recorder()
        with openai.OpenAI(
                base_url=direct_emu.openai_base_url, api_key=O_KEY, max_retries=0,
                http_client=httpx2.Client(transport=RecordingTransport(recorder=direct))) as d, \
                Proxy(proxied_emu.base_url, recorder=via) as proxy, \
                openai.OpenAI(base_url=proxy.base_url + "/v1", api_key=O_KEY,
                              max_retries=0) as p:
            for stream in (False, False, True):
                assert _openai_call(d, api, stream) == _openai_call(p, api, stream)
    assert rows(via) == rows(direct)
    assert [r.verdict for r in via.records] == ["cold", "hit", "hit"]
    assert (via.records[1].cache_read_tokens or 0) > 1024


def test_async_sdks_streaming_through_the_proxy(proxy: Proxy, ledger: Ledger) -> None:
    """The async anthropic and openai clients, streaming and not, each call one ledger row
    with the usage the SDK saw."""
    async def main() -> list[tuple[int, int]]:
        seen = []
        async with anthropic.AsyncAnthropic(base_url=proxy.base_url, api_key=A_KEY,
                                            max_retries=0) as a:
            message = await a.messages.create(**a_body())
            seen.append((message.usage.cache_read_input_tokens or 0,
                         message.usage.cache_creation_input_tokens or 0))
            async with a.messages.stream(**a_body()) as stream:
                final = await stream.get_final_message()
            seen.append((final.usage.cache_read_input_tokens or 0,
                         final.usage.cache_creation_input_tokens or 0))
        async with openai.AsyncOpenAI(base_url=proxy.base_url + "/v1", api_key=O_KEY,
                                      max_retries=0) as o:
            chunks = [c async for c in await o.chat.completions.create(
                model=O_MODEL, messages=o_messages(), stream=True,
                stream_options={"include_usage": True})]
            usage = chunks[-1].usage
            assert usage is not None and usage.prompt_tokens_details is not None
            seen.append((usage.prompt_tokens_details.cached_tokens or 0, -1))
        return seen

    seen = asyncio.run(main())
    stored = sorted(ledger.iter_records(), key=lambda r: r.ts_utc)
    assert [r.verdict for r in stored] == ["cold", "hit", "cold"]
    assert [(r.cache_read_tokens, r.cache_write_tokens) for r in stored[:2]] == seen[:2]
    assert stored[2].cache_read_tokens == seen[2][0]
    assert all(A_KEY not in r.to_json().decode() for r in stored)


def _mock(handler: Any) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


def test_bad_input_is_forwarded_untouched_and_answered_clearly(proxy: Proxy,
                                                                ledger: Ledger) -> None:
    """A non-JSON body reaches the upstream (its 400 comes back) and unknown paths are
    forwarded; each gets one ``unknown`` row (``test_proxy_unanalysed`` has the details)."""
    with httpx.Client(base_url=proxy.base_url) as client:
        bad = client.post("/v1/messages", content=b"not json{",
                          headers={"content-type": "application/json", "x-api-key": A_KEY})
        unknown = client.get("/v1/models", headers={"x-api-key": A_KEY})
        counting = client.post("/v1/messages/count_tokens", json=a_body(),
                               headers={"x-api-key": A_KEY})
    assert bad.status_code == 400 and b"error" in bad.content
    assert unknown.status_code in (404, 405) and counting.status_code in (404, 405)
    stored = list(ledger.iter_records())
    assert [(r.wire_format, r.verdict) for r in stored] == [("unknown", "unknown")] * 3
    assert [r.status_code for r in stored] == [400, unknown.status_code,
                                               counting.status_code]
    assert "not a JSON object" in str(stored[0].verdict_detail["unknown_reason"])


def test_unreachable_upstream_is_a_clear_502(ledger: Ledger) -> None:
    """With nothing listening upstream the client gets 502 JSON naming the upstream, and the
    call is recorded as failed."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    upstream = f"http://127.0.0.1:{port}"
    with Proxy(upstream, recorder=Recorder(ledger)) as p, \
            anthropic.Anthropic(base_url=p.base_url, api_key=A_KEY, max_retries=0) as client, \
            pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(**a_body())
    assert caught.value.status_code == 502
    body = caught.value.response.json()
    assert body["error"]["type"] == "upstream_unreachable"
    assert upstream in body["error"]["message"]
    (record,) = ledger.iter_records()
    assert record.verdict == "unknown" and record.error_class is not None


def test_upstream_timeout_is_a_504() -> None:
    """An upstream that does not answer in time gives 504 JSON naming it."""
    def upstream(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    with Proxy("http://slow.invalid", transport=_mock(upstream)) as p, \
            httpx.Client(base_url=p.base_url) as client:
        response = client.post("/v1/messages", json=a_body())
    assert response.status_code == 504
    assert response.json()["error"]["type"] == "upstream_timeout"
    assert "http://slow.invalid" in response.json()["error"]["message"]


def test_body_limit_and_access_token(emu: Emulator) -> None:
    """Bodies over the limit get 413; with an access token, requests without it get 401 and
    requests with it pass (the token is not forwarded)."""
    seen: list[httpx.Headers] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return httpx.Response(200, json={"ok": True})

    with Proxy("http://upstream.invalid", transport=_mock(upstream), access_token=TOKEN,
               max_body_bytes=1000) as p, httpx.Client(base_url=p.base_url) as client:
        assert client.post("/v1/x", content=b"{}").status_code == 401
        assert client.post("/v1/x", content=b"{}",
                           headers={"x-stableprompt-token": "wrong-token-0000"}
                           ).status_code == 401
        ok = client.post("/v1/x?a=1", content=b"{}", headers={"x-stableprompt-token": TOKEN,
                                                             "x-api-key": A_KEY})
        bearer = client.get("/v1/y", headers={"proxy-authorization": f"Bearer {TOKEN}"})
        big = client.post("/v1/x", content=b"x" * 1001, headers={"x-stableprompt-token": TOKEN})
    assert ok.status_code == 200 and ok.json() == {"ok": True}
    assert bearer.status_code == 200
    assert big.status_code == 413 and big.json()["error"]["type"] == "request_too_large"
    assert len(seen) == 2
    assert "x-stableprompt-token" not in seen[0] and "proxy-authorization" not in seen[1]
    assert seen[0]["x-api-key"] == A_KEY  # API keys are forwarded
    assert seen[0]["host"] == "upstream.invalid"


def test_upstream_errors_and_compressed_bodies_pass_byte_for_byte(tmp_path: Path) -> None:
    """An upstream error keeps its status, headers and body; a gzip body reaches the client
    still compressed (same bytes, same Content-Encoding) and its usage is still recorded."""
    usage = {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 0}
    payload = json.dumps({"id": "msg_1", "type": "message", "role": "assistant",
                          "model": A_MODEL, "content": [{"type": "text", "text": "ok"}],
                          "stop_reason": "end_turn", "usage": usage}).encode()
    packed = gzip.compress(payload)

    def upstream(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["messages"][0]["content"] == "fail":
            return httpx.Response(529, headers={"retry-after": "7", "x-request-id": "r-1"},
                                  content=b'{"type":"error","error":{"type":"overloaded_error"}}')
        return httpx.Response(200, content=packed, headers={
            "content-type": "application/json", "content-encoding": "gzip",
            "content-length": str(len(packed))})

    recorder = Recorder()
    with Proxy("http://upstream.invalid", recorder=recorder, transport=_mock(upstream)) as p, \
            httpx.Client(base_url=p.base_url) as client:
        failed = client.post("/v1/messages", json=a_body("fail"))
        with client.stream("POST", "/v1/messages", json=a_body()) as ok:
            raw = b"".join(ok.iter_raw())
            headers = ok.headers
    assert failed.status_code == 529
    assert failed.headers["retry-after"] == "7" and failed.headers["x-request-id"] == "r-1"
    assert failed.content == b'{"type":"error","error":{"type":"overloaded_error"}}'
    assert raw == packed
    assert headers["content-encoding"] == "gzip" and headers["content-length"] == str(len(packed))
    assert [r.error_class for r in recorder.records] == ["ProviderHTTPError", None]
    assert recorder.records[1].input_tokens_total == 5


def test_stream_chunks_are_forwarded_as_they_arrive() -> None:
    """The first SSE chunk reaches the client while the upstream is still holding the rest
    (no buffering), and the call is recorded when the stream ends."""
    release = asyncio.Event()
    loop_box: list[asyncio.AbstractEventLoop] = []

    class Held(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            loop_box.append(asyncio.get_running_loop())
            yield b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",' \
                  b'"usage":{"input_tokens":3,"output_tokens":0}}}\n\n'
            await release.wait()
            yield b'event: message_stop\ndata: {"type":"message_stop"}\n\n'

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=Held())

    recorder = Recorder()
    with Proxy("http://upstream.invalid", recorder=recorder, transport=_mock(upstream)) as p, \
            httpx.Client(base_url=p.base_url, timeout=5) as client, \
            client.stream("POST", "/v1/messages", json={**a_body(), "stream": True}) as r:
        chunks = r.iter_raw()
        first = next(chunks)
        assert first.startswith(b"event: message_start")
        assert not recorder.records  # still streaming
        loop_box[0].call_soon_threadsafe(release.set)
        rest = b"".join(chunks)
    assert rest.endswith(b'{"type":"message_stop"}\n\n')
    assert len(recorder.records) == 1


def test_capture_dir_holds_what_lint_reads(emu: Emulator, tmp_path: Path) -> None:
    """``capture=`` writes each recorded request as a capture ``read_capture`` accepts, with
    the API key scrubbed."""
    body = a_body(f"my key is {A_KEY}")
    with Proxy(emu.base_url, capture=str(tmp_path / "cap")) as p, \
            anthropic.Anthropic(base_url=p.base_url, api_key=A_KEY, max_retries=0) as client:
        client.messages.create(**body)
        client.messages.create(**body)
    (path,) = (tmp_path / "cap").glob("proxy-*.jsonl")
    assert A_KEY not in path.read_text()
    capture = read_capture(path)
    assert len(capture.entries) == 2
    assert capture.entries[0].wire_format == "anthropic"


def test_capture_and_row_scrub_a_key_reused_as_the_session_id(
        tmp_path: Path, ledger: Ledger, capsys: pytest.CaptureFixture[str]) -> None:
    """A credential header's value sent again as the session header is scrubbed from the
    capture (so ``lint --json`` cannot reprint it) and from the ledger row."""
    from stableprompt._cli import main

    azure_key = "0123456789abcdef0123456789abcdef"  # Azure's shape: no key pattern matches
    forwarded: list[str] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        forwarded.append(request.headers["x-stableprompt-session"])
        return httpx.Response(200, json={
            "id": "m", "type": "message", "role": "assistant", "model": A_MODEL,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1}})

    with Proxy("http://upstream.invalid", transport=_mock(upstream),
               recorder=Recorder(ledger), capture=str(tmp_path / "cap")) as p, \
            httpx.Client(base_url=p.base_url) as client:
        answer = client.post("/v1/messages", json=a_body(f"key {azure_key}"), headers={
            "api-key": azure_key, "x-stableprompt-session": azure_key})
        assert answer.status_code == 200
        deadline = time.monotonic() + 10
        while not list(ledger.iter_records()) and time.monotonic() < deadline:
            time.sleep(0.01)
    assert forwarded == [azure_key]  # forwarded unchanged; only what is stored is scrubbed
    (path,) = (tmp_path / "cap").glob("proxy-*.jsonl")
    assert azure_key not in path.read_text()
    assert main(["lint", "--json", str(path)]) in (0, 1)
    assert azure_key not in capsys.readouterr().out
    (record,) = ledger.iter_records()
    assert azure_key not in record.to_json().decode()


def test_bound_socket_lets_asyncio_disable_nagle() -> None:
    """The listening socket says TCP (``IPPROTO_TCP``), so asyncio sets ``TCP_NODELAY`` on
    its connections: a body chunk never waits ~40 ms for the client's delayed ACK."""
    import socket

    sock = bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


class _Held(httpx.AsyncByteStream):
    """An SSE body whose second half waits until ``release`` is set (from any thread)."""

    def __init__(self, release: Any) -> None:
        self.release = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
               b'"usage":{"input_tokens":3,"output_tokens":0}}}\n\n')
        while not self.release.is_set():
            await asyncio.sleep(0.005)
        yield b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def test_client_gone_mid_stream_is_recorded_as_incomplete() -> None:
    """A client that disconnects mid-stream closes the upstream stream; its row is
    ``unknown`` with the stream noted as cut."""
    import threading

    release = threading.Event()

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=_Held(release))

    recorder = Recorder()
    with Proxy("http://upstream.invalid", recorder=recorder, transport=_mock(upstream)) as p:
        with httpx.Client(base_url=p.base_url, timeout=5) as client, \
                client.stream("POST", "/v1/messages", json={**a_body(), "stream": True}) as r:
            next(r.iter_raw())
        for _ in range(200):  # the proxy notices the disconnect on its own loop
            if recorder.records:
                break
            time.sleep(0.01)
        release.set()
    (record,) = recorder.records
    assert record.verdict == "unknown"
    assert record.verdict_detail.get("stream") == "closed before the end of the body"


def test_concurrency_beyond_the_limit_is_answered_503() -> None:
    """With ``max_concurrency=2`` two streams are forwarded; a third request while both are
    in flight gets the proxy's own JSON 503 (``error_body``'s shape, not uvicorn's plain
    text), is not forwarded and gets an unanalysed row saying so; once the streams ended,
    requests pass again."""
    import threading

    release = threading.Event()
    forwarded: list[str] = []
    logged: list[tuple[str, str, int]] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        forwarded.append(request.url.path)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=_Held(release))

    recorder = Recorder()
    with Proxy("http://upstream.invalid", transport=_mock(upstream), max_concurrency=2,
               recorder=recorder, on_call=lambda m, p, s, r: logged.append((m, p, s))) as p, \
            httpx.Client(base_url=p.base_url, timeout=5) as client, \
            client.stream("POST", "/v1/messages", json={**a_body(), "stream": True}) as r1, \
            client.stream("POST", "/v1/messages", json={**a_body(), "stream": True}) as r2:
        streams = [r1.iter_raw(), r2.iter_raw()]
        for chunks in streams:
            next(chunks)
        refused = client.post("/v1/messages", json=a_body())
        assert refused.status_code == 503
        assert refused.headers["content-type"] == "application/json"
        error = refused.json()
        assert error["type"] == "error" and error["error"]["type"] == "proxy_overloaded"
        assert "2 requests in flight" in error["error"]["message"]
        assert "--max-concurrency" in error["error"]["message"]
        assert len(forwarded) == 2 and ("POST", "/v1/messages", 503) in logged
        release.set()
        for chunks in streams:
            assert b"".join(chunks).endswith(b'{"type":"message_stop"}\n\n')
        assert client.post("/v1/messages", json={**a_body(), "stream": True}).status_code == 200
    assert len(forwarded) == 3
    assert len(recorder.records) == 4  # the refused request's row too
    refused_row = next(r for r in recorder.records if r.status_code == 503)
    assert refused_row.verdict == "unknown" and refused_row.wire_format == "unknown"
    assert "max-concurrency" in str(refused_row.verdict_detail["unknown_reason"])


def test_idle_connections_do_not_count_as_requests_in_flight() -> None:
    """``max_concurrency`` counts requests, not connections: with a limit of 1, three
    clients each keeping an idle keep-alive connection open are all served, one request at a
    time (the connection cap is ``CONNECTION_FACTOR`` x the limit)."""
    from stableprompt._proxy._server import CONNECTION_FACTOR

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": []})

    with Proxy("http://upstream.invalid", transport=_mock(upstream), max_concurrency=1) as p:
        clients = [httpx.Client(base_url=p.base_url, timeout=5)
                   for _ in range(CONNECTION_FACTOR - 1)]
        try:
            for _ in range(2):
                assert [c.get("/v1/models").status_code for c in clients] == [200] * len(
                    clients)
        finally:
            for c in clients:
                c.close()


HALF_OPEN = 1100
"""Connections the slowloris test holds: more than the default cap of open connections
(``CONNECTION_FACTOR`` x ``DEFAULT_MAX_CONCURRENCY`` = 1,024)."""


@contextlib.contextmanager
def _files_for(count: int) -> Iterator[None]:
    """Raise the process's soft ``RLIMIT_NOFILE`` to ``count`` for the block (both ends of
    each loopback connection are this process's), or skip when the hard limit is lower."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < count:
        if hard != resource.RLIM_INFINITY and hard < count:
            pytest.skip(f"needs {count} open files, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _half_open(base_url: str, count: int, first_bytes: bytes) -> list[socket.socket]:
    """``count`` loopback connections to ``base_url`` that sent ``first_bytes`` (headers
    never finished)."""
    host, port = base_url.removeprefix("http://").split(":")
    held = []
    try:
        for _ in range(count):
            sock = socket.create_connection((host, int(port)), timeout=5)
            held.append(sock)
            if first_bytes:
                sock.sendall(first_bytes)
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return held


def _closed_by_peer(sock: socket.socket, timeout_s: float) -> bool:
    """Whether the peer closes ``sock`` (EOF or reset) within ``timeout_s`` seconds."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def test_half_open_connections_do_not_starve_another_client() -> None:
    """The proxy under 1,100 idle half-open connections from one client keeps answering
    another client (default limits: the cap of open connections is 1,024)."""
    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": []})

    started = time.monotonic()
    with _files_for(2 * HALF_OPEN + 1024), \
            Proxy("http://upstream.invalid", transport=_mock(upstream)) as p:
        held = _half_open(p.base_url, HALF_OPEN, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
        try:
            with httpx.Client(base_url=p.base_url, timeout=10) as other:
                answers = [other.get("/v1/models") for _ in range(3)]
            assert [a.status_code for a in answers] == [200] * 3
            assert answers[0].json() == {"data": []}
            # the oldest half-open connections made room: closed by the proxy
            assert _closed_by_peer(held[0], 5.0)
            assert p.guard.evicted >= HALF_OPEN + 1 - 1024
        finally:
            for sock in held:
                sock.close()
    assert time.monotonic() - started < 60


def test_the_connection_cap_fits_the_open_file_limit() -> None:
    """Under the common soft open-file limit of 1,024 the cap is 704 (1,024 less 256 upstream
    connections and 64 other files), so the guard still makes room before accept fails."""
    import resource

    from stableprompt._proxy._app import ProxyConfig
    from stableprompt._proxy._server import connection_cap

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    config = ProxyConfig("http://upstream.invalid")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        assert connection_cap(config) == 704
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(100_000, hard), hard))
        assert connection_cap(config) == 1024
        assert connection_cap(ProxyConfig("http://upstream.invalid", max_concurrency=None)) \
            is None
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_headers_not_finished_in_time_close_the_connection(
        parser: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection that sends nothing, trickles a request line byte by byte, or starts a
    second request on a keep-alive connection without finishing its headers is closed at
    ``header_timeout_s``; a request sent at once is answered (uvicorn's httptools and h11)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from stableprompt._proxy import _connections

    monkeypatch.setattr(_connections, "AutoHTTPProtocol",
                        {"h11": H11Protocol, "httptools": HttpToolsProtocol}[parser])

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": []})

    timeout_s = 0.5
    with Proxy("http://upstream.invalid", transport=_mock(upstream),
               header_timeout_s=timeout_s) as p:
        silent, trickling, kept_alive = _half_open(p.base_url, 3, b"")
        try:
            kept_alive.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            assert kept_alive.recv(4096).startswith(b"HTTP/1.1 200")
            kept_alive.sendall(b"GET /v1/models HTTP/1.1\r\n")  # the next one, unfinished
            started = time.monotonic()
            for byte in b"GET /v1/models HTTP/1.1\r\n":  # one byte per 50 ms: 1.3 s
                try:
                    trickling.sendall(bytes([byte]))
                except OSError:
                    break  # closed under it
                time.sleep(0.05)
            assert _closed_by_peer(trickling, 2.0)
            assert _closed_by_peer(silent, 2.0) and _closed_by_peer(kept_alive, 2.0)
            assert time.monotonic() - started < timeout_s + 2.0
            assert p.guard.timed_out == 3
            with httpx.Client(base_url=p.base_url, timeout=5) as other:
                assert other.get("/v1/models").status_code == 200
        finally:
            for sock in (silent, trickling, kept_alive):
                sock.close()


def test_an_idle_keep_alive_connection_outlasts_the_clients_expiry() -> None:
    """A keep-alive connection idle for longer than httpx's own expiry (5 s, what the
    Anthropic and OpenAI SDKs use) is still open: the client, not the proxy, closes it, so a
    request never races the server closing the connection it is sent on."""
    from stableprompt._proxy._server import KEEP_ALIVE_TIMEOUT_S

    assert KEEP_ALIVE_TIMEOUT_S > 5

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": []})

    with Proxy("http://upstream.invalid", transport=_mock(upstream)) as p:
        host, port = p.base_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
            time.sleep(6.0)  # longer than uvicorn's default keep-alive timeout (5 s)
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")


def test_sdks_find_the_proxy_through_their_base_url_variables(
        proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ANTHROPIC_BASE_URL=<proxy>`` and ``OPENAI_BASE_URL=<proxy>/v1``, as the README says,
    route the official SDKs through the proxy with no code change."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", proxy.base_url)
    monkeypatch.setenv("OPENAI_BASE_URL", proxy.base_url + "/v1")
    with anthropic.Anthropic(api_key=A_KEY, max_retries=0) as a, \
            openai.OpenAI(api_key=O_KEY, max_retries=0) as o:
        a.messages.create(**a_body())
        o.chat.completions.create(model=O_MODEL, messages=o_messages())
    # a row is finished once the proxy has sent the last body byte, which can be just after
    # the client has read it: wait for the second row rather than race it
    deadline = time.monotonic() + 10
    while len(proxy.recorder.records) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r.wire_format for r in proxy.recorder.records] == ["anthropic", "openai-chat"]


def test_upstream_prefix_and_query_are_kept() -> None:
    """An upstream base path is prepended to the request path; the raw path and query pass
    unchanged (percent-escapes included)."""
    seen: list[httpx.URL] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        return httpx.Response(204)

    with Proxy("http://upstream.invalid/api/", transport=_mock(upstream)) as p, \
            httpx.Client(base_url=p.base_url) as client:
        assert client.get("/v1/files/a%2Fb?x=1&y=%20").status_code == 204
        assert client.get("/v1/files/..hidden/a.b").status_code == 204  # no dot segment
    assert seen[0].raw_path == b"/api/v1/files/a%2Fb?x=1&y=%20"
    assert seen[1].raw_path == b"/api/v1/files/..hidden/a.b"


@pytest.mark.parametrize("target", [
    "/../secret", "/v1/../../secret", "/v1/%2e%2e/%2E%2E/secret", "/v1/..%2F..%2Fsecret",
    "/v1/%2e%2e%2fsecret", "/v1/.%2e/secret", "/v1/..%5Csecret", "/v1/%252e%252e/secret",
    "/v1/./models", "/v1/..",
])
def test_a_dot_segment_cannot_leave_the_upstream_prefix(target: str) -> None:
    """A path with a dot segment (literal or percent-encoded, also beside an encoded slash or
    backslash) is answered 400 in the proxy's JSON shape, never forwarded, and gets one
    unanalysed row."""
    import http.client

    forwarded: list[bytes] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        forwarded.append(request.url.raw_path)
        return httpx.Response(204)

    recorder = Recorder()
    with Proxy("http://upstream.invalid/api/", recorder=recorder,
               transport=_mock(upstream)) as p:
        host, port = p.base_url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=5)
        try:
            connection.request("GET", target, headers={"x-api-key": A_KEY,
                                                       "x-stableprompt-session": "s-path"})
            answer = connection.getresponse()
            status, body = answer.status, json.loads(answer.read())
        finally:
            connection.close()
        p.app.drain()
    assert forwarded == []
    assert status == 400
    assert body["type"] == "error" and body["error"]["type"] == "path_outside_upstream"
    (record,) = recorder.records
    assert (record.wire_format, record.verdict, record.status_code) == ("unknown", "unknown",
                                                                        400)
    assert record.session_id == "s-path"
    assert "refused" in str(record.verdict_detail["unknown_reason"])
    assert A_KEY not in record.to_json().decode()


def test_an_upstream_cut_mid_stream_cuts_the_client_and_is_recorded() -> None:
    """When the upstream connection dies mid-stream the client's response ends short (not
    as a clean end) and the row is ``unknown``."""
    class Cut(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
                   b'"usage":{"input_tokens":3,"output_tokens":0}}}\n\n')
            raise httpx.ReadError("connection reset")

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Cut())

    recorder = Recorder()
    with Proxy("http://upstream.invalid", recorder=recorder, transport=_mock(upstream)) as p, \
            httpx.Client(base_url=p.base_url, timeout=5) as client, \
            pytest.raises(httpx.RemoteProtocolError), \
            client.stream("POST", "/v1/messages", json={**a_body(), "stream": True}) as r:
        b"".join(r.iter_raw())
    (record,) = recorder.records
    assert record.verdict == "unknown" and record.error_class is not None


def test_chunked_request_bodies_and_head_requests_pass() -> None:
    """A request body sent chunked arrives whole with its length; a HEAD answer keeps its
    headers and has no body."""
    seen: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "HEAD":
            return httpx.Response(200, headers={"content-length": "42", "x-kind": "head"})
        return httpx.Response(200, json={"ok": True})

    with Proxy("http://upstream.invalid", transport=_mock(upstream)) as p, \
            httpx.Client(base_url=p.base_url) as client:
        ok = client.post("/v1/upload", content=iter([b'{"a":', b' 1}']))
        head = client.head("/v1/thing")
    assert ok.status_code == 200
    assert seen[0].content == b'{"a": 1}' and seen[0].headers["content-length"] == "8"
    assert "transfer-encoding" not in seen[0].headers
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == "42" and head.headers["x-kind"] == "head"


def test_every_method_is_forwarded_and_every_refusal_recorded() -> None:
    """A WebDAV method reaches the upstream (it got Starlette's plain-text 405 and no row);
    a body over the limit (413) and a body that falls silent (408, ``body_timeout_s``) are
    refused in JSON and each gets an unanalysed row with its status and reason."""
    seen: list[str] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        return httpx.Response(207, json={"ok": True})

    recorder = Recorder()
    with Proxy("http://upstream.invalid", transport=_mock(upstream), recorder=recorder,
               max_body_bytes=1000, body_timeout_s=0.3) as p:
        with httpx.Client(base_url=p.base_url) as client:
            dav = client.request("PROPFIND", "/v1/files")
            big = client.post("/v1/messages", content=b"x" * 1001)
        host, port = p.base_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n"
                         b"\r\n{\"model\":")
            answer = sock.recv(65536)
    assert dav.status_code == 207 and seen == ["PROPFIND"]
    assert big.status_code == 413
    assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer
    rows = {r.status_code: r for r in recorder.records}
    assert set(rows) == {207, 413, 408}
    assert rows[207].verdict_detail["method"] == "PROPFIND"
    assert "--max-body-bytes" in str(rows[413].verdict_detail["unknown_reason"])
    assert "--body-timeout" in str(rows[408].verdict_detail["unknown_reason"])


@pytest.mark.parametrize("in_thread", [False, True])
def test_diagnostics_through_the_proxy_name_the_compared_call(
        in_thread: bool, tmp_path: Path) -> None:
    """``proxy --diagnostics`` (``Recorder(diagnostics=True)``): the Anthropic SDK's requests
    reach the upstream with diagnostics.previous_message_id (null, then the first answer's
    id) and the beta value beside the SDK's own; the server's reason is joined to ours on the
    second row."""
    seen: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        n = len(seen)
        reason = None if n == 1 else {"type": "system_changed",
                                      "cache_missed_input_tokens": 1500}
        return httpx.Response(200, json={
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": A_MODEL,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 1,
                      "cache_read_input_tokens": 0,
                      "cache_creation_input_tokens": 1500},
            "diagnostics": {"cache_miss_reason": reason}})

    with Ledger(tmp_path / "calls.db") as led:
        recorder = Recorder(led, diagnostics=True)
        with Proxy("http://upstream.invalid", recorder=recorder, transport=_mock(upstream),
                   record_in_thread=in_thread) as p:
            client = anthropic.Anthropic(base_url=p.base_url, api_key=A_KEY, max_retries=0)
            for system in (SYSTEM, "It is Monday. " + SYSTEM):
                client.messages.create(model=A_MODEL, max_tokens=8, system=[
                    {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                    messages=[{"role": "user", "content": "hi"}],
                    extra_headers={"anthropic-beta": "other-2026-01-01"})
        stored = list(led.iter_records())
    sent = [json.loads(r.content) for r in seen]
    assert sent[0]["diagnostics"] == {"previous_message_id": None}
    assert sent[1]["diagnostics"] == {"previous_message_id": "msg_1"}
    assert [r.headers["anthropic-beta"] for r in seen] == [
        "other-2026-01-01,cache-diagnosis-2026-04-07"] * 2
    assert len(stored) == 2
    joined = stored[1].verdict_detail["server_diagnosis"]
    assert isinstance(joined, dict)
    assert (joined["reason"], joined["agreement"]) == ("system_changed", "agree")


def test_any_failure_to_send_is_a_json_502_with_a_row() -> None:
    """An exception from sending that is no httpx error (h11 refusing to frame a body, a bug
    in a transport) is answered with the proxy's JSON 502 and recorded, not a plain-text 500
    with a traceback and no row (found by the session's reviewer)."""
    def upstream(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("cannot frame this body")

    recorder = Recorder()
    with Proxy("http://upstream.invalid", transport=_mock(upstream), recorder=recorder) as p, \
            httpx.Client(base_url=p.base_url) as client:
        llm = client.post("/v1/messages", json=a_body(), headers={"x-api-key": A_KEY})
        other = client.post("/v1/files", content=b"abc")
        again = client.post("/v1/files", content=b"abc")  # the connection still serves
    for answer in (llm, other, again):
        assert answer.status_code == 502
        assert answer.json()["error"]["type"] == "upstream_request_failed"
    assert len(recorder.records) == 3
    assert all(r.error_class == "RuntimeError" for r in recorder.records)
