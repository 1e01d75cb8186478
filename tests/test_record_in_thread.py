"""``record_in_thread=True`` on the clients and the recording transports: the caller's thread
only sends; the recorder's thread (``_recording._deferred``) decodes, analyses and finishes,
and the records are the ones inline recording makes."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from conftest import FakeRecorder
from stableprompt import (
    ConfigurationError,
    Ledger,
    PromptBuilder,
    ProviderConnectionError,
    UsageRecord,
)
from stableprompt._client import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    OpenAIClient,
)
from stableprompt._recording import _call, _deferred, _intake, _memory, _outcome
from stableprompt._recording._observer import ResponseObserver
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._transport import (
    PENDING_EXTENSION,
    AsyncRecordingTransport,
    RecordingTransport,
)
from test_client import MODEL, chat_body, rendered_turns, retry_sleeps
from test_transport import (
    API_KEY,
    CHAT_SYSTEM,
    OPENAI_KEY,
    SYSTEM_BLOCKS,
    FakeProvider,
    conversation,
)

SRC = Path(__file__).resolve().parents[1] / "src"

COMPARED = ("turn", "verdict", "lcp_bytes", "lcp_tokens", "predicted_cache_read_tokens",
            "cache_read_tokens", "cache_write_tokens", "request_tokens", "response_id",
            "status_code", "error_class", "session_id", "model", "wire_format", "lineage",
            "request_fingerprint", "input_tokens_total", "uncached_tokens", "output_tokens",
            "verdict_detail", "diagnostics", "provider")


def same_records(inline: list[UsageRecord], threaded: list[UsageRecord]) -> None:
    """The two runs made the same records (ids and times aside, ``verdict_detail["gap_s"]``
    included; predecessors by position)."""
    def fields(record: UsageRecord) -> dict[str, Any]:
        out = {k: getattr(record, k) for k in COMPARED}
        out["verdict_detail"] = {k: v for k, v in record.verdict_detail.items() if k != "gap_s"}
        return out

    assert [fields(r) for r in inline] == [fields(r) for r in threaded]
    position = [{r.record_id: i for i, r in enumerate(run)} for run in (inline, threaded)]
    assert [position[0].get(r.predecessor_id or "") for r in inline] == \
        [position[1].get(r.predecessor_id or "") for r in threaded]


@pytest.fixture
def caller_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names of the recording steps that ran on the test's own thread: body decoding
    (``loads`` of the request in the call memory, of the response in the outcome),
    ``segment_rendered``, the analysis and the finishing."""
    main = threading.get_ident()
    seen: list[str] = []

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == main:
                seen.append(name)
            return real(*args, **kwargs)
        return wrapped

    for module in (_memory, _outcome):
        monkeypatch.setattr(module, "loads", spy("loads", module.loads))
    for name in ("segment_rendered", "_record", "store"):
        monkeypatch.setattr(Recorder, name, spy(name, getattr(Recorder, name)))
    monkeypatch.setattr(_intake, "analyse", spy("_analyse", _intake.analyse))
    monkeypatch.setattr(_memory.CallMemory, "segment_rendered",
                        spy("segment_rendered", _memory.CallMemory.segment_rendered))
    yield seen


def threaded_anthropic(fake: FakeProvider, recorder: Recorder, **kwargs: Any
                       ) -> AnthropicClient:
    return AnthropicClient(API_KEY, base_url="http://provider.test", recorder=recorder,
                           transport=httpx.MockTransport(fake), **kwargs)


# ---------------------------------------------------------------------------- our clients


@pytest.mark.parametrize("stream", [False, True])
def test_client_in_thread_records_what_inline_records_off_the_callers_thread(
        tmp_path: Path, stream: bool, caller_work: list[str]) -> None:
    """Four rendered turns: the caller's thread decodes, segments, analyses and finishes
    nothing (the request's body is never decoded); ``last_record`` / ``EventStream.record``
    are each call's record; after ``flush`` records, summary and ledger equal an inline run's."""
    requests = rendered_turns(4)
    inline = Recorder(tokenizer="bytes/4")
    inline_client = threaded_anthropic(FakeProvider(httpx), inline)
    for request in rendered_turns(4):
        if stream:
            with inline_client.send(request, stream=True) as events:
                list(events)
        else:
            inline_client.send(request)
    assert {"segment_rendered", "_analyse", "_record", "store"} <= set(caller_work)  # inline
    caller_work.clear()
    with Ledger(tmp_path / "calls.db") as ledger:
        recorder = Recorder(ledger, tokenizer="bytes/4")
        with threaded_anthropic(FakeProvider(httpx), recorder, record_in_thread=True) as client:
            for request in requests:
                if stream:
                    with client.send(request, stream=True) as events:
                        list(events)
                        record = events.record
                else:
                    client.send(request)
                    record = client.last_record
                assert record is not None and record.response_id is not None
                assert caller_work == [] and "body" not in request.__dict__
                assert record == client.last_record
            assert client.flush(10.0)
            assert recorder.records[-1] == client.last_record
        rows = ledger.records()
    assert caller_work == []
    same_records(inline.records, recorder.records)
    assert rows == recorder.records
    assert [r.verdict for r in rows] == ["cold", "hit", "hit", "hit"]
    assert recorder.summary(price=False).hit_rate == inline.summary(price=False).hit_rate


def test_dict_bodies_and_chat_streams_in_thread_match_inline(
        caller_work: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenAIClient with dict bodies (sent as given, decoded on the recorder's thread) and
    chat streams: the same records as inline, none of the work on the caller's thread; no
    ledger, so the responses too are observed on the recorder's thread (``Tape``), with the
    stream's TTFT as it arrived."""
    main, observed = threading.get_ident(), []
    real_feed = ResponseObserver.feed

    def feed(self: ResponseObserver, chunk: bytes) -> None:
        if threading.get_ident() == main:
            observed.append(len(chunk))
        real_feed(self, chunk)

    monkeypatch.setattr(ResponseObserver, "feed", feed)
    def run(recorder: Recorder, **kwargs: Any) -> None:
        client = OpenAIClient(OPENAI_KEY, base_url="http://provider.test/v1",
                              recorder=recorder, transport=httpx.MockTransport(
                                  FakeProvider(httpx)), **kwargs)
        with client:
            client.send(chat_body(1))
            with client.send(chat_body(2), stream=True) as events:
                list(events)

    inline, threaded = Recorder(tokenizer="bytes/4"), Recorder(tokenizer="bytes/4")
    run(inline)
    assert observed and caller_work
    caller_work.clear()
    observed.clear()
    run(threaded, record_in_thread=True)
    assert caller_work == [] and observed == []
    same_records(inline.records, threaded.records)
    assert [r.verdict for r in threaded.records] == ["cold", "hit"]
    streamed = threaded.records[1]
    assert streamed.ttft_ms is not None and streamed.latency_ms is not None
    assert 0 <= streamed.ttft_ms <= streamed.latency_ms


def test_async_clients_in_thread_record_streams_and_bodies(caller_work: list[str]) -> None:
    """AsyncAnthropicClient and AsyncOpenAIClient (Responses): a body and a stream each;
    ``aclose`` drains the recorder's thread; records as inline, none made on the loop."""
    async def run(recorder: Recorder, **kwargs: Any) -> None:
        fake = FakeProvider(httpx, is_async=True)
        client = AsyncAnthropicClient(API_KEY, base_url="http://provider.test",
                                      recorder=recorder, transport=httpx.MockTransport(fake),
                                      **kwargs)
        first, second = rendered_turns(2)
        await client.send(first)
        async with await client.send(second, stream=True) as events:
            async for _ in events:
                pass
        await client.aclose()
        oa = AsyncOpenAIClient(OPENAI_KEY, base_url="http://provider.test/v1",
                               recorder=recorder, transport=httpx.MockTransport(fake), **kwargs)
        items = [{"role": "developer", "content": CHAT_SYSTEM}, {"role": "user", "content": "q"}]
        async with oa:
            await oa.send({"model": "gpt-4.1", "input": items})
            async with await oa.send({"model": "gpt-4.1", "input": items},
                                     stream=True) as events:
                async for _ in events:
                    pass
                assert events.record is not None

    inline, threaded = Recorder(tokenizer="bytes/4"), Recorder(tokenizer="bytes/4")
    asyncio.run(run(inline))
    caller_work.clear()
    asyncio.run(run(threaded, record_in_thread=True))
    assert caller_work == []
    same_records(inline.records, threaded.records)
    assert [r.wire_format for r in threaded.records] == ["anthropic"] * 2 + \
        ["openai-responses"] * 2


def test_retries_and_errors_in_thread_are_each_recorded() -> None:
    """A 429 then 503 then 200 gives three records in order, as inline; a connection error
    is raised as ours and its call recorded (``error_class``), the client still usable."""
    fake = FakeProvider(httpx)
    fake.script += [
        httpx.Response(429, headers={"retry-after": "0"},
                       json={"type": "error", "error": {"type": "rate_limit_error"}}),
        httpx.Response(503, json={"type": "error", "error": {"type": "overloaded_error"}}),
    ]
    recorder = Recorder(tokenizer="bytes/4")
    client = threaded_anthropic(fake, recorder, record_in_thread=True, max_retries=2)
    retry_sleeps(client)
    request = rendered_turns(1)[0]
    assert client.send(request)["id"] == "msg_0001"
    assert client.last_record is not None and client.last_record.status_code == 200
    assert client.flush(10.0)
    assert [r.status_code for r in recorder.records] == [429, 503, 200]
    assert [r.error_class for r in recorder.records] == ["ProviderHTTPError"] * 2 + [None]

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    broken = AnthropicClient(API_KEY, base_url="http://provider.test", recorder=recorder,
                             transport=httpx.MockTransport(refuse), max_retries=0,
                             record_in_thread=True)
    with pytest.raises(ProviderConnectionError):
        broken.send(rendered_turns(2)[1])
    broken.close()  # a client given a recorder flushes it, leaving its thread running
    assert recorder.records[-1].error_class == "ProviderConnectionError"
    assert recorder.records[-1].verdict == "unknown"
    assert client.send(rendered_turns(2)[1])["id"] == "msg_0002"
    assert client.last_record is not None and client.last_record.verdict == "hit"


def test_a_queued_finishing_records_the_calls_latency_not_the_queues() -> None:
    """With the recorder's thread busy for 0.5 s, a call (answered at once) and a failed one
    are finished late, each with its own latency (the observer's close, the failure's time),
    not the wait in the queue."""
    recorder = Recorder(tokenizer="bytes/4")
    client = threaded_anthropic(FakeProvider(httpx), recorder, record_in_thread=True,
                                max_retries=0)
    gate = threading.Event()
    recorder.worker.submit(gate.wait)
    client.send(rendered_turns(1)[0])

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    broken = AnthropicClient(API_KEY, base_url="http://provider.test", recorder=recorder,
                             transport=httpx.MockTransport(refuse), max_retries=0,
                             record_in_thread=True)
    with pytest.raises(ProviderConnectionError):
        broken.send(rendered_turns(1)[0])
    threading.Timer(0.5, gate.set).start()
    assert recorder.flush(10.0)
    ok, failed = recorder.records
    assert failed.error_class == "ProviderConnectionError"
    assert ok.latency_ms is not None and failed.latency_ms is not None
    assert ok.latency_ms < 400 and failed.latency_ms < 400


def test_diagnostics_in_thread_name_the_predecessor_recorded_on_the_thread() -> None:
    """``diagnostics=True``: before sending, the client waits for the recorder's thread, so
    the second request names the first response as inline."""
    fake = FakeProvider(httpx)
    fake.extra = {"diagnostics": {"cache_miss_reason": None}}
    recorder = Recorder(tokenizer="bytes/4")
    with threaded_anthropic(fake, recorder, diagnostics=True, record_in_thread=True) as client:
        for request in rendered_turns(2):
            client.send(request)
    sent = [json.loads(r.content) for r in fake.requests]
    assert sent[1]["diagnostics"] == {"previous_message_id": "msg_0001"}
    assert recorder.records[1].diagnostics is not None
    assert recorder.records[1].diagnostics["response"] == {"cache_miss_reason": None}


def test_rendered_params_are_the_bodys_members() -> None:
    """``ProviderRequest.params`` (what a client recording in thread reads instead of the
    body) holds the model and extra params as they decode from the body, in every format;
    a request the SDK did not render has none."""
    head = PromptBuilder(tokenizer=None).system("Be brief. " * 20).freeze()
    conv = head.conversation()
    conv.user("hello")
    rendered = conv.render()
    extra: dict[str, Any] = {"stream": True, "metadata": {"user_id": "u-1"},
                             "temperature": 0.5, "stop": ("a", "b")}
    for request in (rendered.to_anthropic(model=MODEL, max_tokens=10, **extra),
                    rendered.to_openai_chat(model="gpt-4.1", **extra),
                    rendered.to_openai_responses(model="gpt-4.1", **extra)):
        params = request.params
        assert params is not None and set(params) == {"model", *extra}
        assert "body" not in request.__dict__
        assert all(request.body[key] == value for key, value in params.items())
    assert type(request)(request.wire_format, request.path, request.content).params is None


# ---------------------------------------------------------------------------- official SDKs


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_sdk_over_a_threaded_transport_records_as_inline(
        tmp_path: Path, stream: bool, caller_work: list[str]) -> None:
    """The official SDK over ``RecordingTransport(record_in_thread=True)``: the body is not
    parsed on the caller's thread; the response's pending holds the record once waited for;
    the ledger equals an inline run's after ``Recorder.flush``, the provider diagnostics a
    request asked for included (a stream's are watched once the recorder's thread has read
    the request)."""
    def run(recorder: Recorder, threaded: bool) -> None:
        fake = FakeProvider()
        fake.extra = {"diagnostics": {"cache_miss_reason": None}}
        http = httpx2.Client(transport=RecordingTransport(
            httpx2.MockTransport(fake), recorder=recorder, record_in_thread=threaded))
        client = anthropic.Anthropic(api_key=API_KEY, base_url="http://provider.test",
                                     http_client=http, max_retries=0)
        for turns in (1, 2, 3):
            kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 50, "system": SYSTEM_BLOCKS,
                                      "messages": conversation(turns), "extra_body": {
                                          "diagnostics": {"previous_message_id": None}}}
            if stream:
                with client.messages.create(stream=True, **kwargs) as events:
                    list(events)
                    pending = events.response.extensions[PENDING_EXTENSION]
            else:
                raw = client.messages.with_raw_response.create(**kwargs)
                pending = raw.http_response.extensions[PENDING_EXTENSION]
            assert pending.wait(10.0) is not None

    inline = Recorder(tokenizer="bytes/4", session_id="s")
    run(inline, False)
    assert {"loads", "_analyse", "_record"} <= set(caller_work)  # inline: all of it
    caller_work.clear()
    with Ledger(tmp_path / "calls.db") as ledger:
        threaded = Recorder(ledger, tokenizer="bytes/4", session_id="s")
        run(threaded, True)
        assert threaded.flush(10.0)
        rows = ledger.records()
    assert caller_work == []
    same_records(inline.records, threaded.records)
    assert rows == threaded.records
    assert [r.verdict for r in rows] == ["cold", "hit", "hit"]
    assert [(r.diagnostics or {}).get("response") for r in rows] == \
        [{"cache_miss_reason": None}] * 3


def test_async_openai_sdk_over_a_threaded_transport(caller_work: list[str]) -> None:
    """AsyncOpenAI (chat, streamed and not) over ``AsyncRecordingTransport(record_in_thread=
    True)``: records as inline, nothing parsed on the event loop's thread."""
    async def run(recorder: Recorder, threaded: bool) -> None:
        http = httpx2.AsyncClient(transport=AsyncRecordingTransport(
            httpx2.MockTransport(FakeProvider(is_async=True)), recorder=recorder,
            record_in_thread=threaded))
        client = openai.AsyncOpenAI(api_key=OPENAI_KEY, base_url="http://provider.test/v1",
                                    http_client=http, max_retries=0)
        history: Any = [{"role": "system", "content": CHAT_SYSTEM},
                        {"role": "user", "content": "q0"}]
        await client.chat.completions.create(model="gpt-4.1", messages=history)
        history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "q1"}]
        stream = await client.chat.completions.create(
            model="gpt-4.1", messages=history, stream=True,
            stream_options={"include_usage": True})
        async for _ in stream:
            pass
        await client.close()

    inline, threaded = Recorder(tokenizer="bytes/4"), Recorder(tokenizer="bytes/4")
    asyncio.run(run(inline, False))
    caller_work.clear()
    asyncio.run(run(threaded, True))
    assert threaded.flush(10.0)
    assert caller_work == []
    same_records(inline.records, threaded.records)


def test_a_body_that_is_not_json_is_recorded_as_unanalysed_in_thread() -> None:
    """Undecoded on the caller's thread, a recordable path whose body is not a JSON object is
    forwarded, then recorded as ``unknown`` with the analysis error (inline it passes
    unrecorded: ``DeferredRecorder(decode=False)``)."""
    recorder = Recorder(tokenizer="bytes/4")
    answered = httpx2.MockTransport(lambda request: httpx2.Response(400, json={"error": {}}))
    with httpx2.Client(transport=RecordingTransport(answered, recorder=recorder,
                                                    record_in_thread=True)) as http:
        response = http.post("http://provider.test/v1/messages", content=b"[1, 2]")
    assert response.status_code == 400
    assert recorder.flush(10.0)
    (row,) = recorder.records
    assert row.verdict == "unknown" and row.status_code == 400
    assert "not a JSON object" in str(row.verdict_detail["analysis_error"])


def test_a_response_beyond_the_tape_limit_is_recorded_as_unobserved(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A body larger than ``MAX_TAPE_BYTES`` reaches the caller whole; its row says it was
    not observed (``observer_error``, verdict ``unknown``), as an oversized JSON body inline."""
    monkeypatch.setattr(_deferred, "MAX_TAPE_BYTES", 64)
    recorder = Recorder(tokenizer="bytes/4")
    client = threaded_anthropic(FakeProvider(httpx), recorder, record_in_thread=True)
    assert client.send(rendered_turns(1)[0])["id"] == "msg_0001"
    record = client.last_record
    assert record is not None and record.verdict == "unknown"
    assert "not observed" in str(record.verdict_detail["observer_error"])


def test_record_in_thread_needs_a_recorder(fake_recorder: FakeRecorder) -> None:
    """Another CallRecorder has no recording thread: a typed error names the option."""
    with pytest.raises(ConfigurationError) as raised:
        RecordingTransport(recorder=fake_recorder, record_in_thread=True)
    assert raised.value.code == "record-in-thread"


# ---------------------------------------------------------------------------- durability


def test_a_failing_recording_job_loses_no_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """A finishing job that raises (here: storing fails) never reaches the caller: the call
    answers, the failure is logged, and the call's journaled provisional row is imported by
    the next ``replay_spill`` once the recorder closed."""
    def broken(self: Recorder, record: UsageRecord, secrets: tuple[str, ...] = ()) -> None:
        raise OSError("disk on fire")

    db = tmp_path / "calls.db"
    with Ledger(db) as ledger:
        recorder = Recorder(ledger, tokenizer="bytes/4")
        monkeypatch.setattr(Recorder, "store", broken)
        client = threaded_anthropic(FakeProvider(httpx), recorder, record_in_thread=True)
        with caplog.at_level(logging.WARNING, logger="stableprompt.recorder"):
            assert client.send(rendered_turns(1)[0])["id"] == "msg_0001"
            recorder.close()
        assert "recording job failed: OSError: disk on fire" in caplog.text
        assert ledger.records() == []
        assert ledger.replay_spill() == 1
        (row,) = ledger.records()
    assert row.verdict == "unknown" and row.status_code == 200


SCRIPT = """
import os, signal, sys, threading, httpx
from stableprompt import AnthropicClient, Ledger, Recorder
from stableprompt._recording._recorder import Recorder as R

BODY = (b'{"id":"msg_1","type":"message","role":"assistant","content":[],'
        b'"usage":{"input_tokens":5,"cache_read_input_tokens":0,'
        b'"cache_creation_input_tokens":0,"output_tokens":1}}')
mode = sys.argv[2]
if mode == "kill":  # the recorder's thread never gets to finish a call
    real = R.finish
    R.finish = lambda self, *a, **k: threading.Event().wait()
recorder = Recorder(Ledger(sys.argv[1]), tokenizer="bytes/4", session_id="script")
client = AnthropicClient("sk-ant-api03-scripttest-0123456789", base_url="http://x.test",
                         recorder=recorder, record_in_thread=True,
                         transport=httpx.MockTransport(lambda r: httpx.Response(
                             200, content=BODY, headers={"content-type": "application/json"})))
for turn in range(3):
    client.send({"model": "claude-sonnet-4-6", "max_tokens": 5,
                 "messages": [{"role": "user", "content": f"q{turn}"}]})
if mode == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
import atexit  # the program's own exit hook already finds every call stored
atexit.register(lambda: print("stored at exit:", len(recorder.records)))
"""


@pytest.mark.parametrize("mode", ["exit", "kill"])
def test_an_ending_script_loses_no_call(tmp_path: Path, mode: str) -> None:
    """A script that ends without ``flush`` or ``close`` has every call in its ledger (the
    drain at thread shutdown, before the program's own ``atexit`` hooks); one killed with
    calls still queued has them journaled, and the next ``replay_spill`` stores them
    (verdict ``unknown``)."""
    db = tmp_path / "calls.db"
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    done = subprocess.run([sys.executable, str(script), str(db), mode], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(SRC)})
    if mode == "kill":
        assert done.returncode == -signal.SIGKILL, done.stderr
    else:
        assert done.returncode == 0, done.stderr
    with Ledger(db) as ledger:
        if mode == "kill":
            assert ledger.records() == []
            assert ledger.replay_spill() == 3
        rows = ledger.records()
    assert [r.session_id for r in rows] == ["script"] * 3
    assert {r.status_code for r in rows} == {200}
    if mode == "exit":
        assert "stored at exit: 3" in done.stdout
        assert [r.turn for r in rows] == [1, 2, 3]
        assert all("unknown_reason" not in r.verdict_detail for r in rows)
    else:
        assert {r.verdict for r in rows} == {"unknown"}


# ---------------------------------------------------------------------------- review fixes


def _compaction_bodies() -> list[dict[str, Any]]:
    """Two turns of one conversation without a session id, then its compaction (the first
    message rewritten), sent right after the previous answer, as a harness does."""
    def body(messages: list[Any]) -> dict[str, Any]:
        return {"model": MODEL, "max_tokens": 16, "system": SYSTEM_BLOCKS, "messages": messages}
    rewritten = conversation(3)
    rewritten[0] = {"role": "user", "content": [{"type": "text", "text": "Summary: q0 done."}]}
    return [body(conversation(1)), body(conversation(2)), body(rewritten)]


@pytest.mark.parametrize("sink_ms", [0, 20])
def test_a_compaction_in_thread_continues_its_conversation_as_inline(sink_ms: int) -> None:
    """The previous call's end is when its answer ended, not when the recording thread got
    to it: with a slow sink (an exporter) the thread finishes a call after the next one was
    sent, and the rewrite was called another conversation (rule skipped, turn 1)."""
    def slow_sink(_record: UsageRecord) -> None:
        time.sleep(sink_ms / 1000)

    rows = {}
    for mode in (False, True):
        recorder = Recorder(tokenizer="bytes/4", sinks=[slow_sink])
        client = threaded_anthropic(FakeProvider(httpx), recorder, record_in_thread=mode)
        for body in _compaction_bodies():
            client.send(body)
        client.close()
        third = recorder.records[2]
        rows[mode] = (third.verdict_detail.get("predecessor_rule"), third.turn, third.verdict)
    assert rows[True] == rows[False]
    assert rows[False][:2] == ("same-head-recent", 3)


def test_flush_and_last_record_from_a_sink_do_not_wait_for_themselves() -> None:
    """A sink runs on the recording thread: ``flush()``, ``close()`` and ``last_record``
    there return at once (False / the record as it is) instead of waiting for the jobs
    queued behind it; every call is still recorded and the client closes."""
    seen: list[Any] = []
    holder: dict[str, AnthropicClient] = {}

    def sink(record: UsageRecord) -> None:
        client = holder["client"]
        seen.append((client.flush(5), client.recorder.flush(), client.last_record))

    recorder = Recorder(tokenizer="bytes/4", sinks=[sink])
    client = holder["client"] = threaded_anthropic(FakeProvider(httpx), recorder,
                                                   record_in_thread=True)
    started = time.monotonic()
    for request in rendered_turns(3):
        client.send(request)
    assert client.flush(10)
    client.close()
    assert time.monotonic() - started < 5
    assert len(recorder.records) == 3 and len(seen) == 3
    assert all(flushed is False and again is False for flushed, again, _ in seen)


def test_a_dropped_recorder_does_not_keep_its_thread() -> None:
    """Nothing but the recorder holds its worker (the exit hook is weak): a client and
    recorder dropped after their calls leave no recording thread behind."""
    def names() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("stableprompt-record")]

    before = len(names())
    for _ in range(5):
        client = threaded_anthropic(FakeProvider(httpx), Recorder(tokenizer="bytes/4"),
                                    record_in_thread=True)
        client.send(rendered_turns(1)[0])
        assert client.last_record is not None
        del client
    gc.collect()
    for _ in range(50):
        if len(names()) <= before:
            break
        threading.Event().wait(0.05)
    assert len(names()) <= before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_records_with_its_own_thread_and_journal(tmp_path: Path) -> None:
    """After a fork, the child's recorder makes its own thread and journal: its calls are all
    recorded, and the parent's journal and rows are untouched."""
    script = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(SRC)!r}]
        import httpx
        from stableprompt import Ledger
        from stableprompt._recording._recorder import Recorder
        from test_record_in_thread import threaded_anthropic
        from test_client import rendered_turns
        from test_transport import FakeProvider
        ledger = Ledger({str(tmp_path / "f.db")!r})
        recorder = Recorder(ledger, tokenizer="bytes/4")
        client = threaded_anthropic(FakeProvider(httpx), recorder, record_in_thread=True)
        turns = rendered_turns(5)
        client.send(turns[0]); client.send(turns[1]); client.flush()
        pid = os.fork()
        if pid == 0:
            for request in turns[2:]:
                client.send(request)
            ok = client.flush(10) and client.last_record is not None
            client.close()
            os._exit(0 if ok and len(recorder.records) == 5 else 3)
        _, status = os.waitpid(pid, 0)
        client.close()
        rows = list(Ledger({str(tmp_path / "f.db")!r}).iter_records())
        print(os.waitstatus_to_exitcode(status), len(rows))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    child_exit, rows = out.stdout.split()
    assert child_exit == "0"
    assert rows == "5"  # the parent's 2 and the child's 3


def test_record_in_thread_must_be_a_bool() -> None:
    """A string or another object is refused (``"no"`` used to switch the mode on)."""
    for value in ("no", "false", 1, object()):
        with pytest.raises(ConfigurationError) as info:
            RecordingTransport(httpx.MockTransport(FakeProvider(httpx)),
                               record_in_thread=value)  # type: ignore[arg-type]
        assert info.value.code == "record-in-thread"
        with pytest.raises(ConfigurationError):
            threaded_anthropic(FakeProvider(httpx), Recorder(tokenizer="bytes/4"),
                               record_in_thread=value)


def test_closing_a_threaded_transport_stores_its_calls() -> None:
    """An official SDK client closed right after its calls: the transport's close waits for
    the calls still recording (its own recorder is closed, a recorder passed in flushed)."""
    for own in (True, False):
        recorder = None if own else Recorder(tokenizer="bytes/4")
        transport = RecordingTransport(httpx2.MockTransport(FakeProvider()),
                                       recorder=recorder, record_in_thread=True)
        with anthropic.Anthropic(api_key=API_KEY, base_url="http://provider.test",
                                 http_client=httpx2.Client(transport=transport)) as sdk:
            for t in range(1, 6):
                sdk.messages.create(model=MODEL, max_tokens=16, system=SYSTEM_BLOCKS,
                                    messages=conversation(t))
        assert isinstance(transport.recorder, Recorder)
        assert len(transport.recorder.records) == 5


@pytest.mark.parametrize("mode", [False, True])
def test_last_record_after_a_failed_call_is_that_call(mode: bool) -> None:
    """A call whose every attempt failed without a response is the last call: its record
    (``ProviderConnectionError``), not the previous call's."""
    fake = FakeProvider(httpx)
    down = threading.Event()

    def provider(request: httpx.Request) -> Any:
        if down.is_set():
            raise httpx.ConnectError("connection refused", request=request)
        return fake(request)

    client = AnthropicClient(API_KEY, base_url="http://provider.test",
                             recorder=Recorder(tokenizer="bytes/4"), max_retries=0,
                             transport=httpx.MockTransport(provider), record_in_thread=mode)
    turns = rendered_turns(2)
    client.send(turns[0])
    first = client.last_record
    down.set()
    with pytest.raises(ProviderConnectionError):
        client.send(turns[1])
    failed = client.last_record
    assert failed is not None and first is not None
    assert failed.record_id != first.record_id
    assert failed.error_class is not None and failed.verdict == "unknown"
    client.close()


def _deferred_calls(recorder: Recorder, turns: int) -> list[_call.Pending]:
    """``turns`` calls of one conversation through a ``DeferredRecorder`` as the recording
    transport makes them (start, then the response's observe + feed + close), a stream's
    chunks fed one by one on odd turns; each call finished before the next is sent."""
    deferred = _deferred.DeferredRecorder(recorder, decode=False)
    pending: list[_call.Pending] = []
    for turn, request in enumerate(rendered_turns(turns)):
        started = deferred.start("/v1/messages", {"x-api-key": API_KEY}, request.content,
                                 rendered=True)
        assert started is not None
        usage = {"input_tokens": 10, "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": len(request.content) // 4, "output_tokens": 3}
        if turn % 2:
            chunks = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in (
                ("message_start", {"type": "message_start", "message": {
                    "id": f"msg_{turn}", "usage": usage}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": "hi"}}),
                ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 3}}),
                ("message_stop", {"type": "message_stop"}))]
            headers = {"content-type": "text/event-stream"}
        else:
            chunks = [json.dumps({"id": f"msg_{turn}", "type": "message",
                                  "usage": usage}).encode()]
            headers = {"content-type": "application/json"}
        observer = deferred.observe(started, status_code=200, headers=headers,
                                    content_encoding="")
        for chunk in chunks:
            observer.feed(chunk)
        observer.close()
        pending.append(started)
        assert recorder.flush(10.0)
    return pending


@pytest.mark.parametrize("journaled", [False, True], ids=["tape", "journal"])
def test_a_call_in_thread_makes_no_reference_cycle(tmp_path: Path, journaled: bool) -> None:
    """With the collector off, a call recorded in thread (the caller's part and the
    recorder's thread's) leaves nothing only a collection would free: every object of it is
    freed by reference counting once the caller drops it, the queued jobs' handles included
    (a handle drops its job once run), so no call adds a collection's work. Both caller
    paths: the tape (no journal) and the live, journaled observer."""
    ledger = Ledger(tmp_path / "calls.db") if journaled else None
    recorder = Recorder(ledger, tokenizer="bytes/4")
    _deferred_calls(recorder, 2)  # warm: thread started, tokenizer, lineage seen
    gc.collect()
    gc.disable()
    try:
        pending = _deferred_calls(recorder, 6)
        handles = [p.finishing for p in pending]
        assert all(h is not None for h in handles)
        assert len(recorder.records) == 8 and all(r.verdict != "unknown"
                                                  for r in recorder.records[2:])
        ours = {id(p) for p in pending}
        del pending  # nothing made after: an id of ours still in use is one of ours
        # ``type(o) is``: an isinstance test would import what a lazy module proxy stands for
        assert not [o for o in gc.get_objects() if type(o) is _call.Pending and id(o) in ours]
        assert gc.collect() == 0
    finally:
        gc.enable()
        recorder.close()
        if ledger is not None:
            assert len(ledger.records()) == 8
            ledger.close()
    assert len(handles) == 6  # held throughout: they kept nothing of their calls alive
