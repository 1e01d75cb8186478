"""Tests for the response observer (``_observer``): content encodings and streams cut short."""

from __future__ import annotations

import gzip
import json
from typing import Any

import brotli  # type: ignore[import-untyped]
import httpx
import httpx2
import pytest
import zstandard

from stableprompt._recording import _decoders
from stableprompt._recording._observer import Observation, ResponseObserver
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._transport import RecordingTransport
from test_transport import SYSTEM_BLOCKS, FakeProvider, anthropic_sdk, conversation

CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4.1",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "x"}}],
        "usage": {"prompt_tokens": 3000, "completion_tokens": 1, "total_tokens": 3001,
                  "prompt_tokens_details": {"cached_tokens": 2944}}}
ENCODERS = {"br": brotli.compress, "zstd": zstandard.ZstdCompressor().compress,
            "gzip": gzip.compress}


def post_encoded(encoding: str, recorder: Recorder) -> dict[str, Any]:
    """POST a chat request whose answer arrives ``encoding``-compressed as a stream (as from a
    real server, so the transport sees the encoded bytes); returns what the caller decoded."""
    data = ENCODERS[encoding](json.dumps(CHAT).encode())

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=iter([data[:7], data[7:]]), headers={
            "content-type": "application/json", "content-encoding": encoding})

    transport = RecordingTransport(httpx.MockTransport(handler), recorder=recorder)
    with httpx.Client(transport=transport) as client:
        answer: dict[str, Any] = client.post(
            "http://provider.test/v1/chat/completions",
            json={"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}).json()
    return answer


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip"])
def test_compressed_answers_are_decoded_for_usage(encoding: str) -> None:
    """brotli and zstd answers (httpx asks for them when their packages are installed) are
    decoded like gzip: the usage is read, the caller gets the same body."""
    recorder = Recorder(tokenizer="bytes/4")
    assert post_encoded(encoding, recorder) == CHAT
    (record,) = recorder.records
    assert (record.input_tokens_total, record.cache_read_tokens) == (3000, 2944)
    assert "observer_error" not in record.verdict_detail


def test_brotli_without_its_package_is_unknown_with_the_reason(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without brotli/brotlicffi importable (``br`` then is not in SUPPORTED_DECODERS, see
    test_decoders) the usage is unknown and the record says which package would decode it;
    the caller's answer is untouched."""
    monkeypatch.delitem(_decoders.SUPPORTED_DECODERS, "br")
    recorder = Recorder(tokenizer="bytes/4")
    assert post_encoded("br", recorder) == CHAT
    (record,) = recorder.records
    assert record.verdict == "unknown" and record.cache_read_tokens is None
    reason = str(record.verdict_detail["unknown_reason"])
    assert "'br'" in reason and "brotli" in reason
    assert record.error_class is None


def _sse(events: list[tuple[str, Any]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n"
                   for name, data in events).encode()


def test_stream_cut_by_the_server_is_unknown_and_never_a_predecessor() -> None:
    """An Anthropic stream that ends after message_start and a delta (no message_delta):
    verdict unknown with the accumulator's reason, the cache counters kept, and the next call
    is not compared with it."""
    start = {"id": "msg_cut", "type": "message", "role": "assistant",
             "model": "claude-sonnet-4-6", "content": [],
             "usage": {"input_tokens": 5, "cache_read_input_tokens": 0,
                       "cache_creation_input_tokens": 4000, "output_tokens": 1}}
    body = _sse([("message_start", {"type": "message_start", "message": start}),
                 ("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}}),
                 ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": "Hel"}})])
    fake = FakeProvider()
    fake.script.append(httpx2.Response(200, headers={"content-type": "text/event-stream"},
                                       content=iter([body])))
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_sdk(fake, recorder)
    kwargs: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 5,
                              "system": SYSTEM_BLOCKS, "messages": conversation(1)}
    list(client.messages.create(stream=True, **kwargs))
    client.messages.create(**kwargs)
    cut, after = recorder.records
    assert cut.verdict == "unknown" and cut.error_class is None
    assert cut.verdict_detail["incomplete"] is True
    assert cut.verdict_detail["unknown_reason"] == (
        "stream ended before message_delta: output_tokens unknown")
    assert cut.verdict_detail["verdict_if_complete"] == "cold"
    assert (cut.cache_write_tokens, cut.output_tokens) == (4000, None)
    assert after.verdict == "cold" and after.predecessor_id is None


@pytest.mark.parametrize(("answers", "watched"), [
    ([None, None, True], True),  # known after two chunks: the kept ones are read too
    ([None, False], False),  # not asked for: nothing read
    ([None], True),  # never known by the end: read then
])
def test_a_late_diagnostics_decision_reads_the_events_kept_meanwhile(
        answers: list[bool | None], watched: bool) -> None:
    """``watch_diagnostics`` as a callable (a request decoded on the recorder's thread): the
    stream is kept aside until it answers; diagnostics in the first event are still found
    when it answers yes, or never answers by the close."""
    raw = _sse([
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "model": "m", "diagnostics": {"cache_miss_reason": "ttl"},
            "usage": {"input_tokens": 5, "cache_read_input_tokens": 0,
                      "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ])
    asked = iter(answers)
    last: list[bool | None] = [None]

    def decision() -> bool | None:
        last[0] = next(asked, last[0])
        return last[0]

    seen: list[Observation] = []

    def sink(observation: Observation) -> None:
        seen.append(observation)

    observer = ResponseObserver(sink, usage_format="anthropic", status_code=200,
                                headers={"content-type": "text/event-stream"},
                                clock=lambda: 0.0, started=0.0, watch_diagnostics=decision)
    for i in range(0, len(raw), 40):
        observer.feed(raw[i:i + 40])
    observer.close()
    (observation,) = seen
    assert observation.usage is not None and observation.usage.output_tokens == 2
    assert observation.diagnostics == ({"cache_miss_reason": "ttl"} if watched else None)
